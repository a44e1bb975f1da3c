// Replay implementation: the recorded space, the replay driver, its metrics and `tune replay`.
#include "tuner/replay.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "base/exit_code.h"
#include "base/table.h"
#include "costmodel/cost_model_adapters.h"
#include "dataset/record_database.h"
#include "measure/task_factory.h"
#include "search/auto_strategy.h"
#include "tuner/parse_command_line.h"
#include "tuner/tuner.h"
#include "tuner/tuning_flags.h"

namespace tune::tuner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxInt = std::numeric_limits<int>::max();

}  // namespace

// ---- Metrics -------------------------------------------------------------------------------

double FractionOfOptimum(double optimum_ms, double best_ms) {
  if (!std::isfinite(best_ms) || best_ms <= 0) return 0;
  return optimum_ms / best_ms;
}

double RandomBaselineFraction(const std::vector<double>& sorted_times_ms, int64_t draws) {
  const int64_t n = static_cast<int64_t>(sorted_times_ms.size());
  if (draws <= 0 || n == 0) return 0;
  if (draws >= n) return 1;
  const double optimum = sorted_times_ms.front();
  // survival = S(i) = P(none of the i-1 fastest drawn); P(best = i) = S(i) - S(i+1).
  double expected = 0, survival = 1;
  for (int64_t i = 1; i <= n - draws + 1 && survival > 0; ++i) {
    double next = survival * static_cast<double>(n - i + 1 - draws) / static_cast<double>(n - i + 1);
    expected += FractionOfOptimum(optimum, sorted_times_ms[i - 1]) * (survival - next);
    survival = next;
  }
  return expected;
}

double MethodologyScore(double strategy_fraction, double random_fraction) {
  if (random_fraction >= 1) return std::numeric_limits<double>::quiet_NaN();
  return (strategy_fraction - random_fraction) / (1 - random_fraction);
}

// ---- Driver --------------------------------------------------------------------------------

namespace {

/// RunReplay with the caller's strategy, or (null) one made by name.
absl::StatusOr<ReplayTrace> ReplayWith(const ReplaySpace& space, search::SearchStrategy* strategy,
                                       const ReplayOptions& options) {
  if (options.budget <= 0) return absl::InvalidArgumentError("replay budget must be positive");
  if (options.batch <= 0) return absl::InvalidArgumentError("replay batch must be positive");
  // The replay kind of task factory, over the caller's space (not owned here).
  measure::TaskFactoryOptions fo;
  fo.replay = std::shared_ptr<const ReplaySpace>(&space, [](const ReplaySpace*) {});
  auto factory = measure::TaskFactory::Create(measure::ReplayTarget(space.cache()), fo);
  if (!factory.ok()) return factory.status();
  measure::ReplayTask task(&space);
  auto db = dataset::RecordDatabase::Open(":memory:");
  if (!db.ok()) return db.status();

  TuneOptions o;
  o.trials_per_task = options.budget;  // the strategy runs out after the recorded configs
  o.batch = options.batch;
  o.seed = options.seed;
  // auto is its choice with a model where the caller gives one (ResolveStrategy).
  o.strategy = search::AutoStrategy::Resolve(options.strategy, options.cost_model != nullptr);
  o.strategy_options = options.strategy_options;
  o.cost_model = "none";  // the caller's model, if any (options.cost_model)
  o.transfer = false;
  o.finalists = 0;
  o.cutoff_factor = 0;
  Tuner tuner(db->get(), std::move(*factory), o);
  LoopTask loop;
  loop.info.name = space.cache().kernel_name;
  loop.task = &task;
  loop.strategy = strategy;
  loop.cost_model = options.cost_model;
  auto outcomes = tuner.Run(std::vector<LoopTask>{loop});
  if (!outcomes.ok()) return outcomes.status();
  ReplayTrace trace = task.trace();
  trace.exhausted = (*outcomes)[0].exhausted;
  return trace;
}

}  // namespace

absl::StatusOr<ReplayTrace> RunReplay(const ReplaySpace& space, const ReplayOptions& options) {
  return ReplayWith(space, nullptr, options);
}

absl::StatusOr<ReplayTrace> RunReplay(const ReplaySpace& space, search::SearchStrategy& strategy,
                                      const ReplayOptions& options) {
  return ReplayWith(space, &strategy, options);
}


absl::StatusOr<std::unique_ptr<search::CostModel>> CreateReplayCostModel(const std::string& name,
                                                                        const ReplaySpace& space, uint64_t seed) {
  // costmodel/'s factory: with a space and no template, "xgb" and "xgb-reg" featurize knob values
  // (KnobCostModel). Unknown names are InvalidArgument.
  costmodel::CostModelOptions options;
  options.xgb.seed = seed;
  costmodel::CostModelSubject subject;
  subject.space = &space.space();
  return costmodel::CreateCostModel(name, subject, options);
}

// ---- Summary -------------------------------------------------------------------------------

std::vector<int> ReplayCheckpoints(int budget) {
  std::vector<int> out;
  for (int64_t b = 25; b < budget; b *= 2) out.push_back(static_cast<int>(b));
  if (budget > 0) out.push_back(budget);
  return out;
}

std::vector<double> BestAtCheckpoints(const ReplayTrace& run, const std::vector<int>& checkpoints) {
  std::vector<double> out;
  out.reserve(checkpoints.size());
  for (int b : checkpoints) out.push_back(run.BestAt(b));
  return out;
}

std::vector<ReplayCheckpoint> SummarizeReplay(const ReplaySpace& space, const std::vector<ReplayTrace>& runs,
                                              const std::vector<int>& checkpoints) {
  std::vector<std::vector<double>> best_ms;
  best_ms.reserve(runs.size());
  for (const ReplayTrace& run : runs) best_ms.push_back(BestAtCheckpoints(run, checkpoints));
  return SummarizeReplayBests(space, best_ms, checkpoints);
}

std::vector<ReplayCheckpoint> SummarizeReplayBests(const ReplaySpace& space,
                                                   const std::vector<std::vector<double>>& best_ms,
                                                   const std::vector<int>& checkpoints) {
  TUNE_CHECK(!best_ms.empty()) << "SummarizeReplay needs at least one run";
  std::vector<ReplayCheckpoint> out;
  const double n = static_cast<double>(best_ms.size());
  for (size_t k = 0; k < checkpoints.size(); ++k) {
    const int b = checkpoints[k];
    ReplayCheckpoint c;
    c.budget = b;
    c.min_best_ms = kInf;
    double sum_f = 0, sum_f2 = 0, sum_ms = 0;
    for (const std::vector<double>& run : best_ms) {
      TUNE_CHECK(run.size() == checkpoints.size()) << "a run's bests do not match the checkpoints";
      double best = run[k];
      double f = FractionOfOptimum(space.optimum_ms(), best);
      sum_f += f;
      sum_f2 += f * f;
      sum_ms += best;
      c.min_best_ms = std::min(c.min_best_ms, best);
    }
    c.mean_fraction = sum_f / n;
    c.sd_fraction = best_ms.size() > 1 ? std::sqrt(std::max(0.0, (sum_f2 - n * c.mean_fraction * c.mean_fraction) / (n - 1)))
                                    : 0;
    c.mean_best_ms = sum_ms / n;
    c.random_fraction = RandomBaselineFraction(space.sorted_times_ms(), b);
    c.score = MethodologyScore(c.mean_fraction, c.random_fraction);
    out.push_back(c);
  }
  return out;
}

// ---- tune replay ---------------------------------------------------------------------------

namespace {

std::string Fixed(double v, int digits) {
  if (std::isnan(v) || !std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace

int ReplayCommand(int argc, char** argv) {
  CLI::App app{"tune replay: run a search strategy against a recorded Kernel Tuner space (no hardware).\n"
               "Scores: fraction of optimum (optimum / best found, mean over runs), the exact expected\n"
               "fraction of random search, and P = (strategy - random) / (1 - random) on that fraction.",
               "tune replay"};
  std::string cache_path, strategy = "random", cost_model = "auto";
  std::vector<std::string> option_texts;
  int budget = 100, runs = 30, batch = 1, jobs = 1;
  uint64_t seed = 0;
  app.add_option("cache", cache_path, "Kernel Tuner cache file (.json or .json.gz)")->required();
  app.add_option("--strategy", strategy, "search strategy (random, grid, ...)");
  app.add_option("--budget", budget, "evaluations per run, failed configs included")->check(CLI::Range(1, kMaxInt));
  app.add_option("--runs", runs, "independent runs (seeds seed .. seed+runs-1)")->check(CLI::Range(1, 1000000));
  app.add_option("--seed", seed, "seed of the first run");
  app.add_option("--batch", batch, "configs proposed per round (1: one at a time, as published)")
      ->check(CLI::Range(1, kMaxInt));
  app.add_option("--jobs", jobs, "runs replayed in parallel (results do not depend on it)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--cost-model", cost_model,
                 "cost model for model-guided strategies, fitted after every batch: auto (xgb for sa, "
                 "evolutionary and bandit; none otherwise), none, xgb, xgb-reg");
  app.add_option("--strategy-option", option_texts,
                 "KEY=VALUE strategy setting, repeatable (e.g. eps_greedy=0.1, sa_chains=64)");
  if (auto code = ParseCommandLine(app, argc - 1, argv + 1)) return *code;

  // Reject an unknown strategy, option or cost model before reading a large cache: the checks
  // every tuning command makes.
  TuningFlags flags;
  flags.options.strategy = strategy;
  flags.options.cost_model = cost_model;
  flags.strategy_options = option_texts;
  auto checked = ToTuneOptions(flags);
  if (!checked.ok()) return base::Fail("tune replay", checked.status());
  const search::StrategyOptions& strategy_options = checked->strategy_options;
  auto cache = measure::KernelTunerCache::Load(cache_path);
  if (!cache.ok()) return base::Fail("tune replay", cache.status());
  auto space = ReplaySpace::Create(std::move(*cache));
  if (!space.ok()) return base::Fail("tune replay", space.status());
  const ReplaySpace& rs = **space;
  // auto becomes its choice here: with a model asked for, one that ranks with it.
  strategy = ResolveStrategy(strategy, cost_model, false);
  cost_model = ResolveCostModel(cost_model, strategy);
  if (cost_model == "none") cost_model.clear();
  if (!cost_model.empty()) {
    auto probe = CreateReplayCostModel(cost_model, rs, seed);
    if (!probe.ok()) return base::Fail("tune replay", probe.status());
  }

  // Replay cannot evaluate more distinct configs than are recorded: a larger budget is clamped.
  const int asked_budget = budget;
  if (static_cast<uint64_t>(budget) > rs.recorded()) budget = static_cast<int>(rs.recorded());
  const std::vector<int> checkpoints = ReplayCheckpoints(budget);

  // Per run only its best time at each checkpoint is kept (memory: runs x checkpoints).
  struct RunResult {
    absl::Status status;
    std::vector<double> best_ms;  // at each checkpoint
    bool exhausted = false;
    size_t evaluations = 0;
  };
  std::vector<RunResult> results(runs);
  std::atomic<int> next{0}, done{0};
  std::mutex progress_mu;
  const bool tty = isatty(STDERR_FILENO);
  auto worker = [&] {
    for (int r = next++; r < runs; r = next++) {
      ReplayOptions o;
      o.strategy = strategy;
      o.strategy_options = strategy_options;
      o.budget = budget;
      o.seed = seed + static_cast<uint64_t>(r);
      o.batch = batch;
      std::unique_ptr<search::CostModel> model;
      if (!cost_model.empty()) {
        auto m = CreateReplayCostModel(cost_model, rs, o.seed);
        if (!m.ok()) {
          results[r].status = m.status();
          continue;
        }
        model = std::move(*m);
        o.cost_model = model.get();
      }
      auto trace = RunReplay(rs, o);
      if (trace.ok()) {
        results[r].best_ms = BestAtCheckpoints(*trace, checkpoints);
        results[r].exhausted = trace->exhausted;
        results[r].evaluations = trace->evaluations.size();
      } else {
        results[r].status = trace.status();
      }
      int finished = ++done;
      if (tty) {
        std::lock_guard<std::mutex> lock(progress_mu);
        std::fprintf(stderr, "\r\033[Ktune replay: %s, run %d/%d", strategy.c_str(), finished, runs);
        std::fflush(stderr);
      }
    }
  };
  const int threads = std::min(jobs, runs);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (tty) std::fprintf(stderr, "\r\033[K");

  std::vector<std::vector<double>> best_ms;
  best_ms.reserve(runs);
  int exhausted = 0;
  size_t min_evals = std::numeric_limits<size_t>::max();
  for (int r = 0; r < runs; ++r) {
    if (!results[r].status.ok()) {
      return base::Fail("tune replay", absl::Status(results[r].status.code(),
                               absl::StrCat("run ", r, " (seed ", seed + r, "): ", results[r].status.message())));
    }
    best_ms.push_back(std::move(results[r].best_ms));
    if (results[r].exhausted) {
      ++exhausted;
      min_evals = std::min(min_evals, results[r].evaluations);
    }
  }

  const auto& c = rs.cache();
  std::printf("replay %s on %s (%s)\n", c.kernel_name.empty() ? "?" : base::EscapeControl(c.kernel_name).c_str(),
              c.device_name.empty() ? "?" : base::EscapeControl(c.device_name).c_str(),
              base::EscapeControl(c.path).c_str());
  std::printf("space %llu points, %zu recorded (%zu failed), optimum %s ms\n",
              static_cast<unsigned long long>(rs.space().Size()), rs.recorded(), rs.failed(),
              Fixed(rs.optimum_ms(), 4).c_str());
  std::printf("strategy %s, %d runs (seeds %llu..%llu), budget %d, batch %d, cost model %s\n", strategy.c_str(), runs,
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed + runs - 1), budget, batch,
              cost_model.empty() ? "none" : cost_model.c_str());
  if (asked_budget > budget) {
    std::printf("budget %d is more than the %d recorded configs: clamped to %d\n", asked_budget, budget, budget);
  }
  if (exhausted > 0) {
    std::printf("%d runs stopped early: the strategy proposed nothing more after %zu evaluations\n", exhausted,
                min_evals);
  }
  std::printf("\n");
  std::vector<std::vector<std::string>> rows;
  for (const ReplayCheckpoint& cp : SummarizeReplayBests(rs, best_ms, checkpoints)) {
    rows.push_back({std::to_string(cp.budget), Fixed(cp.mean_fraction, 3), Fixed(cp.sd_fraction, 3),
                    Fixed(cp.random_fraction, 3), Fixed(cp.score, 3), Fixed(cp.mean_best_ms, 4),
                    Fixed(cp.min_best_ms, 4)});
  }
  base::PrintTable({"evals", "fraction", "sd", "random", "P", "mean best ms", "best ms"}, rows,
                   {.align = std::vector<base::Align>(7, base::Align::kRight)});
  return 0;
}

}  // namespace tune::tuner
