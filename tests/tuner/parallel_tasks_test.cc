// Tests of the tuning loop with batches of several tasks in flight (TuneOptions::parallel_tasks):
// overlapping batches of different tasks, never one task twice, the same records as one at a time.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "measure/kernel_measurer.h"
#include "measure/target.h"
#include "measure/task.h"
#include "search/space.h"
#include "tests/common/test_db.h"
#include "tests/common/test_seed.h"
#include "tests/common/toy_space.h"
#include "tuner/tuner.h"

namespace tune::test {
namespace {

/// What the tasks of one run share: how many batches are being measured now and at most, and
/// whether one task was ever measured twice at once. With `wait_for_overlap`, a batch waits
/// (at most `limit`) until another batch is being measured too: the sequential loop never
/// gets there, and `timed_out` says so instead of a hang.
struct ParallelGate {
  std::mutex mu;
  std::condition_variable cv;
  bool wait_for_overlap = false;
  std::chrono::milliseconds limit{5000};
  std::atomic<int> calls{0};  // Measure calls begun
  int outstanding = 0, most = 0;
  bool timed_out = false;
  bool task_twice = false;
  std::map<std::string, int> per_task;  // batches being measured, by workload key
  std::set<std::pair<std::string, std::string>> overlapping;  // tasks measured at the same time
};

/// A task over ConstrainedSpace() with its own workload key and no default schedule, whose
/// Measure reports to `gate`; a config costs LinearCost times a per-task factor.
class GatedTask : public measure::Task {
 public:
  GatedTask(std::string key, double factor, ParallelGate* gate) : space_(ConstrainedSpace()), factor_(factor), gate_(gate) {
    keys_.workload_key = std::move(key);
    keys_.op = "fake";
    keys_.shape_json = "{}";
    keys_.flops = 1e6;
  }
  const measure::TaskKeys& keys() const override { return keys_; }
  const search::ConfigSpace& space() const override { return space_; }
  std::optional<search::Config> DefaultConfig() const override { return std::nullopt; }
  const codegen::Template* tmpl() const override { return nullptr; }
  std::vector<measure::MeasureResult> Measure(const std::vector<search::Config>& configs,
                                              const measure::MeasureProtocol&) override {
    const std::string& key = keys_.workload_key;
    ++gate_->calls;
    {
      std::unique_lock<std::mutex> lock(gate_->mu);
      for (const auto& [other, n] : gate_->per_task) {
        if (n > 0 && other != key) gate_->overlapping.insert(std::minmax(key, other));
      }
      if (++gate_->per_task[key] > 1) gate_->task_twice = true;
      gate_->most = std::max(gate_->most, ++gate_->outstanding);
      gate_->cv.notify_all();
      if (gate_->wait_for_overlap && gate_->most < 2 &&
          !gate_->cv.wait_for(lock, gate_->limit, [&] { return gate_->most >= 2; })) {
        gate_->timed_out = true;
        gate_->wait_for_overlap = false;  // the rest of the run goes on at once
      }
    }
    std::vector<measure::MeasureResult> out;
    for (const search::Config& c : configs) {
      measure::MeasureResult r;
      r.status = measure::MeasureStatus::kOk;
      r.costs_s = {factor_ * LinearCost(c)};
      r.number = 1;
      out.push_back(std::move(r));
      measured_.push_back(c);
    }
    std::lock_guard<std::mutex> lock(gate_->mu);
    --gate_->per_task[key];
    --gate_->outstanding;
    return out;
  }
  const std::vector<search::Config>& measured() const { return measured_; }

 private:
  search::ConfigSpace space_;
  double factor_;
  ParallelGate* gate_;
  measure::TaskKeys keys_;
  std::vector<search::Config> measured_;
};

/// Never called: the loop measures through the tasks above.
class UnusedMeasurer : public measure::KernelMeasurer {
 public:
  std::vector<measure::MeasureResult> Measure(const codegen::Template&, const measure::TaskData*,
                                              const std::vector<search::Config>&,
                                              const measure::MeasureProtocol&) override {
    ADD_FAILURE() << "the factory's measurer was used";
    return {};
  }
};

struct ParallelRun {
  std::vector<tuner::TaskOutcome> outcomes;
  std::map<std::string, std::multiset<std::string>> searched;  // configs recorded by the search, by task
  int records = 0;
  int64_t first_finalist_id = 0, last_search_id = 0;  // record ids (0: none)
};

/// Tunes `tasks` (made with `factors`) in a fresh database with `options`; the records read back.
ParallelRun TuneGated(const std::vector<double>& factors, ParallelGate* gate, const tuner::TuneOptions& options) {
  ParallelRun out;
  auto db = OpenTestDb();
  if (db == nullptr) return out;
  std::vector<std::unique_ptr<GatedTask>> made;
  std::vector<tuner::LoopTask> loop;
  for (size_t i = 0; i < factors.size(); ++i) {
    made.push_back(std::make_unique<GatedTask>("fake/task" + std::to_string(i), factors[i], gate));
    loop.push_back({tuner::TuneTask{"t" + std::to_string(i), codegen::Workload{}, 1}, made.back().get()});
  }
  tuner::Tuner tuner(db.get(), measure::Target::HostCpu(1), std::make_unique<UnusedMeasurer>(), options);
  absl::StatusOr<std::vector<tuner::TaskOutcome>> outcomes = tuner.Run(loop);
  EXPECT_TRUE(outcomes.ok()) << outcomes.status();
  if (!outcomes.ok()) return out;
  out.outcomes = *outcomes;
  for (const tuner::TaskOutcome& o : out.outcomes) {
    for (const dataset::Record& r : RecordsOf(*db, o.task_id, measure::Target::HostCpu(1).Key())) {
      ++out.records;
      if (r.strategy != "finalist") {
        out.searched[o.task.name].insert(r.config_json);
        out.last_search_id = std::max(out.last_search_id, r.id);
      } else if (out.first_finalist_id == 0 || r.id < out.first_finalist_id) {
        out.first_finalist_id = r.id;
      }
    }
  }
  return out;
}

tuner::TuneOptions ParallelOptions(std::mt19937_64& rng) {
  tuner::TuneOptions o;
  o.trials_per_task = std::uniform_int_distribution<int>(6, 14)(rng);
  o.batch = std::uniform_int_distribution<int>(2, 5)(rng);
  o.seed = rng();
  o.strategy = "random";  // its proposals depend on its seed alone: comparable across runs
  o.cost_model = "none";
  o.transfer = false;
  o.command = "parallel_tasks_test";
  return o;
}

// With K = 2, batches of two different tasks are measured at once (the first batch waits for a
// second one: the sequential loop would time out there), never more than two and never one task
// twice; each task records the configs it records with K = 1, each once, and the finalists.
TEST(ParallelTasksTest, TwoTasksInFlightRecordWhatOneAtATimeRecords) {
  std::mt19937_64 rng = TestRng(41);
  const int n = std::uniform_int_distribution<int>(3, 5)(rng);
  std::vector<double> factors;
  for (int i = 0; i < n; ++i) factors.push_back(std::uniform_real_distribution<double>(0.5, 2)(rng));
  tuner::TuneOptions options = ParallelOptions(rng);

  ParallelGate sequential_gate;
  const ParallelRun sequential = TuneGated(factors, &sequential_gate, options);
  EXPECT_EQ(sequential_gate.most, 1);

  ParallelGate gate;
  gate.wait_for_overlap = true;
  int asked = 0;
  options.parallel_tasks = [&asked] {
    ++asked;
    return 2;
  };
  const ParallelRun parallel = TuneGated(factors, &gate, options);
  EXPECT_FALSE(gate.timed_out) << "no second batch was measured while the first one waited";
  EXPECT_EQ(gate.most, 2) << "K = 2 batches at most";
  EXPECT_FALSE(gate.task_twice) << "a task had two batches in flight";
  EXPECT_FALSE(gate.overlapping.empty());
  EXPECT_GT(asked, 0);

  ASSERT_EQ(parallel.outcomes.size(), static_cast<size_t>(n));
  ASSERT_EQ(sequential.outcomes.size(), static_cast<size_t>(n));
  EXPECT_EQ(parallel.records, sequential.records);
  EXPECT_EQ(parallel.searched, sequential.searched);
  for (int i = 0; i < n; ++i) {
    const tuner::TaskOutcome& p = parallel.outcomes[i];
    const tuner::TaskOutcome& s = sequential.outcomes[i];
    EXPECT_EQ(p.trials, options.trials_per_task) << p.task.name;
    EXPECT_EQ(p.measured_now, s.measured_now) << p.task.name;
    EXPECT_EQ(p.best_config, s.best_config) << p.task.name;
    EXPECT_DOUBLE_EQ(p.best_s, s.best_s) << p.task.name;
    const std::multiset<std::string>& configs = parallel.searched.at(p.task.name);
    EXPECT_EQ(std::set<std::string>(configs.begin(), configs.end()).size(), configs.size())
        << p.task.name << ": a config recorded twice";
  }
}

// With batches in flight, a task whose budget is spent has its finalists measured at once,
// while the other tasks' batches go on (one at a time, every finalist comes after the search);
// each task still gets exactly its finalists.
TEST(ParallelTasksTest, ATaskDoneEarlyHasItsFinalistsMeasuredBeforeTheOthersEnd) {
  std::mt19937_64 rng = TestRng(44);
  const int n = std::uniform_int_distribution<int>(3, 5)(rng);
  std::vector<double> factors;
  for (int i = 0; i < n; ++i) factors.push_back(std::uniform_real_distribution<double>(0.5, 2)(rng));
  tuner::TuneOptions options = ParallelOptions(rng);
  options.trials_per_task = std::max(options.trials_per_task, 3 * options.batch);  // 3+ batches a task

  ParallelGate sequential_gate;
  const ParallelRun sequential = TuneGated(factors, &sequential_gate, options);
  ASSERT_GT(sequential.first_finalist_id, 0);
  EXPECT_GT(sequential.first_finalist_id, sequential.last_search_id);

  options.parallel_tasks = [] { return 2; };
  ParallelGate gate;
  const ParallelRun parallel = TuneGated(factors, &gate, options);
  ASSERT_GT(parallel.first_finalist_id, 0);
  EXPECT_LT(parallel.first_finalist_id, parallel.last_search_id)
      << "every finalist was measured after the last task's search";
  EXPECT_FALSE(gate.task_twice) << "a task's finalists overlapped its own batch";
  EXPECT_EQ(parallel.records, sequential.records);
  EXPECT_EQ(parallel.searched, sequential.searched);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(parallel.outcomes[i].best_config, sequential.outcomes[i].best_config) << i;
    EXPECT_DOUBLE_EQ(parallel.outcomes[i].best_s, sequential.outcomes[i].best_s) << i;
  }
}

// A total budget below the tasks' budgets is never overshot by batches in flight at once: each
// holds its share of what is left until it ends.
TEST(ParallelTasksTest, BatchesInFlightShareTheTotalBudget) {
  std::mt19937_64 rng = TestRng(42);
  const int n = std::uniform_int_distribution<int>(3, 5)(rng);
  std::vector<double> factors(n, 1.0);
  tuner::TuneOptions options = ParallelOptions(rng);
  options.finalists = 0;
  options.task_scheduler = "gradient";  // shares the total freely among the tasks
  options.total_trials = std::uniform_int_distribution<int>(options.trials_per_task, n * options.trials_per_task - 1)(rng);
  const int k = std::uniform_int_distribution<int>(2, n)(rng);
  options.parallel_tasks = [k] { return k; };
  ParallelGate gate;
  const ParallelRun run = TuneGated(factors, &gate, options);
  EXPECT_EQ(run.records, options.total_trials);
  EXPECT_LE(gate.most, k);
  EXPECT_FALSE(gate.task_twice);
  int trials = 0;
  for (const tuner::TaskOutcome& o : run.outcomes) trials += o.trials;
  EXPECT_EQ(trials, options.total_trials);
}

// A stop asked for while batches are in flight ends the run after them, marked interrupted,
// with every measured batch recorded and no finalists.
TEST(ParallelTasksTest, AStopEndsTheRunAfterTheBatchesInFlight) {
  std::mt19937_64 rng = TestRng(43);
  const int n = std::uniform_int_distribution<int>(3, 5)(rng);
  std::vector<double> factors(n, 1.0);
  tuner::TuneOptions options = ParallelOptions(rng);
  ParallelGate gate;
  const int stop_after = std::uniform_int_distribution<int>(2, n)(rng);  // of at least 2n batches
  options.should_stop = [&] { return gate.calls.load() >= stop_after; };
  options.parallel_tasks = [] { return 2; };
  auto db = OpenTestDb();
  ASSERT_NE(db, nullptr);
  std::vector<std::unique_ptr<GatedTask>> made;
  std::vector<tuner::LoopTask> loop;
  for (int i = 0; i < n; ++i) {
    made.push_back(std::make_unique<GatedTask>("fake/stop" + std::to_string(i), 1.0, &gate));
    loop.push_back({tuner::TuneTask{"s" + std::to_string(i), codegen::Workload{}, 1}, made.back().get()});
  }
  tuner::Tuner tuner(db.get(), measure::Target::HostCpu(1), std::make_unique<UnusedMeasurer>(), options);
  absl::StatusOr<std::vector<tuner::TaskOutcome>> outcomes = tuner.Run(loop);
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  int trials = 0, measured = 0;
  for (const tuner::TaskOutcome& o : *outcomes) trials += o.trials;
  for (const auto& t : made) measured += static_cast<int>(t->measured().size());
  EXPECT_EQ(trials, measured) << "every measured config is a trial (no finalists after a stop)";
  EXPECT_GE(measured, stop_after);
  EXPECT_LT(trials, n * options.trials_per_task);
  auto runs = db->Runs();
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->at(0).status, "interrupted");
}

}  // namespace
}  // namespace tune::test
