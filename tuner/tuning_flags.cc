// The shared tuning flags: their CLI11 declarations, and the checks that turn them into TuneOptions.
#include "tuner/tuning_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "costmodel/artifact.h"
#include "costmodel/cost_model_adapters.h"
#include "search/auto_strategy.h"
#include "search/strategy.h"
#include "search/task_scheduler.h"

namespace tune::tuner {

void AddProtocolFlags(CLI::App& app, measure::MeasureProtocol& protocol, const std::string& timeout_flag) {
  app.add_option(timeout_flag, protocol.timeout_s, "seconds one candidate's measurement may take")
      ->check(CLI::Range(1, 100000000));
  app.add_option("--build-timeout", protocol.build_timeout_s,
                 "seconds one kernel's build may take before it is cancelled and recorded as a timeout (CUDA; 0 = "
                 "none)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            double v = 0;
            if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v < 0 || v > TuningFlags::kMaxBuildTimeoutS) {
              return absl::StrCat("'", text, "' is not a number of seconds from 0 (no timeout) to ",
                                  TuningFlags::kMaxBuildTimeoutS);
            }
            return {};
          },
          "SECONDS"))
      ->capture_default_str();
  app.add_option("--repeats", protocol.repeats, "timed samples per candidate")->check(CLI::Range(1, 1000));
  app.add_option("--min-repeat-ms", protocol.min_repeat_ms, "minimum duration of one sample")
      ->check(CLI::Range(0, 100000000));
  app.add_flag("--flush-cache", protocol.flush_cache, "flush the caches before each sample");
  app.add_flag("--interleave", protocol.interleave,
               "time each batch's CPU kernels in one process, sample by sample in turn (a host whose speed "
               "drifts slows them alike; finalists are always timed so)");
}

void AddLayoutFlag(CLI::App& app, std::string& layout, const std::string& what) {
  app.add_option("--layout", layout, "activation layout: nchw (default), or nchwc (CPU only): " + what)
      ->check(CLI::IsMember({"nchw", "nchwc"}));
}

void AddTuningFlags(CLI::App& app, TuningFlags& f, const std::string& timeout_flag) {
  TuneOptions& o = f.options;
  app.add_option("--trials", o.trials_per_task, "measurements per task")
      ->check(CLI::Range(1, TuningFlags::kMaxTrials))->capture_default_str();
  app.add_option("--total-trials", o.total_trials, "cap on measurements over all tasks (0 = none)")
      ->check(CLI::Range(0, TuningFlags::kMaxTotalTrials));
  app.add_option("--batch", o.batch, "candidates built and measured per round")
      ->check(CLI::Range(1, TuningFlags::kMaxBatch))->capture_default_str();
  app.add_option("--seed", o.seed, "random seed");
  app.add_option("--strategy", o.strategy,
                 absl::StrCat("search strategy: auto (the default: ", search::AutoStrategy::Choice(), "; ",
                              search::AutoStrategy::ChoiceWithModel(), " where a cost model is given), random, grid, "
                              "sa, evolutionary, bo, bo_ei, bo_pi, bo_ucb, bo_multi, bandit"));
  app.add_option("--strategy-option", f.strategy_options,
                 "KEY=VALUE strategy setting, repeatable (e.g. eps_greedy=0.1, sa_chains=64)");
  app.add_option("--input", f.inputs,
                 "NAME=1x3x224x224: the shape of an ONNX model's input (fixes symbolic dimensions), repeatable");
  app.add_option("--task-scheduler", o.task_scheduler, "which task gets the next batch: round-robin, gradient, ucb");
  app.add_option("--cost-model", o.cost_model,
                 "cost model for model-guided strategies: auto, none, xgb, xgb-reg, or a trained model FILE.tcm "
                 "(`tune train`) to start from");
  app.add_option("--cost-model-option", f.cost_model_options,
                 "KEY=VALUE setting of a pretrained --cost-model FILE.tcm, repeatable (e.g. weight_half_life=64, "
                 "fine_tune=0)");
  AddProtocolFlags(app, o.protocol, timeout_flag);
}

absl::Status CheckTrialBudget(const TuneOptions& o, size_t tasks) {
  if (o.trials_per_task < 1 || o.trials_per_task > TuningFlags::kMaxTrials) {
    return absl::InvalidArgumentError(absl::StrCat("--trials ", o.trials_per_task, " is not in 1 to ", TuningFlags::kMaxTrials));
  }
  if (o.batch < 1 || o.batch > TuningFlags::kMaxBatch) {
    return absl::InvalidArgumentError(absl::StrCat("--batch ", o.batch, " is not in 1 to ", TuningFlags::kMaxBatch));
  }
  if (o.total_trials < 0 || o.total_trials > TuningFlags::kMaxTotalTrials) {
    return absl::InvalidArgumentError(
        absl::StrCat("--total-trials ", o.total_trials, " is not in 0 to ", TuningFlags::kMaxTotalTrials));
  }
  constexpr int64_t kMaxCount = std::numeric_limits<int>::max();
  // trials_per_task <= 10^6, so the product fits 64 bits for any task count below 2^43.
  const int64_t n = tasks > (size_t{1} << 40) ? (int64_t{1} << 40) : static_cast<int64_t>(tasks);
  const int64_t total = int64_t{o.trials_per_task} * n;
  if (total > kMaxCount) {
    return absl::InvalidArgumentError(absl::StrCat("--trials ", o.trials_per_task, " x ", tasks, " tasks is ", total,
                                                   " trials, more than one run can count (", kMaxCount,
                                                   "); lower --trials or tune fewer tasks per run"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TuneOptions> ToTuneOptions(const TuningFlags& f) {
  TuneOptions o = f.options;
  for (const std::string& text : f.strategy_options) {
    if (absl::Status st = search::SetStrategyOption(o.strategy_options, text); !st.ok()) {
      return absl::InvalidArgumentError(st.message());
    }
  }
  for (const std::string& text : f.cost_model_options) {
    if (absl::Status st = costmodel::SetPretrainedOption(o.pretrained_options, text); !st.ok()) return st;
  }
  {
    search::ConfigSpace probe;  // strategy names are checked against the real factory
    probe.AddChoice("x", {0, 1});
    if (auto s = search::SearchStrategy::Create(o.strategy, &probe, o.strategy_options); !s.ok()) return s.status();
  }
  if (costmodel::LooksLikeArtifactPath(o.cost_model)) {
    std::ifstream in(o.cost_model, std::ios::binary);
    if (!in) return absl::NotFoundError("--cost-model " + o.cost_model + ": cannot read the file");
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (!in.good() && !in.eof()) return absl::NotFoundError("--cost-model " + o.cost_model + ": cannot read the file");
    const std::string path = o.cost_model;
    o.cost_model = "auto";
    if (absl::Status st = UsePretrained(bytes.str(), path, f.target_family, &o); !st.ok()) return st;
  } else if (o.cost_model != "auto" && o.cost_model != "none") {
    std::vector<std::string> names = costmodel::CostModelNames();
    if (std::find(names.begin(), names.end(), o.cost_model) == names.end()) {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      return absl::InvalidArgumentError("unknown cost model '" + o.cost_model + "' (auto, none, " + list + ")");
    }
  }
  if (auto sched = search::TaskScheduler::Create(o.task_scheduler, 0); !sched.ok()) return sched.status();
  return o;
}

absl::Status UsePretrained(const std::string& artifact, const std::string& source, const std::string& target_family,
                           TuneOptions* options) {
  absl::StatusOr<costmodel::Artifact> a = costmodel::ParseArtifact(artifact);
  if (!a.ok()) return absl::InvalidArgumentError("--cost-model " + source + ": " + std::string(a.status().message()));
  if (a->model == nullptr || !a->model->trained()) {
    return absl::InvalidArgumentError("--cost-model " + source + ": the " + a->info.kind + " model in it is not trained");
  }
  if (!target_family.empty() && a->info.target_family != target_family) {
    return absl::InvalidArgumentError("--cost-model " + source + " was trained on " +
                                      (a->info.target_family.empty() ? std::string("an unknown") : a->info.target_family) +
                                      " records; it does not apply to a " + target_family + " target");
  }
  options->pretrained_note = absl::StrCat("cost model ", source, ": ", a->info.kind, ", created ",
                                          a->info.created.empty() ? "?" : a->info.created, ", trained on ",
                                          a->info.target_key.empty() ? a->info.target_family : a->info.target_key);
  if (ResolveCostModel(options->cost_model, options->strategy, true) == "none") {
    absl::StrAppend(&options->pretrained_note, " (not used: strategy ", options->strategy, " ranks no candidates with a model)");
  }
  options->pretrained = std::shared_ptr<const costmodel::OfflineModel>(std::move(a->model));
  return absl::OkStatus();
}

}  // namespace tune::tuner
