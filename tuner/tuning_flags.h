// TuningFlags: the tuning flags shared by `tune MODEL`, `tune op` and `tune submit`, declared once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tuner/tuner.h"

namespace CLI {
class App;
}  // namespace CLI

namespace tune::tuner {

/// What a user says about a tuning run wherever it runs (here or on a daemon's workers): the
/// budget, the search, and the measurement protocol, parsed straight into the TuneOptions they
/// set (defaults: TuneOptions' and MeasureProtocol's).
struct TuningFlags {
  static constexpr int kMaxTrials = 1000000;         // --trials (per task)
  static constexpr int kMaxTotalTrials = 100000000;  // --total-trials
  static constexpr int kMaxBatch = 1024;             // --batch
  static constexpr double kMaxBuildTimeoutS = 86400;  // --build-timeout (seconds)

  /// --trials, --total-trials, --batch, --seed, --strategy, --task-scheduler, --cost-model and
  /// the protocol flags land here; a command's own flags may bind to its other fields.
  TuneOptions options;
  /// --strategy-option KEY=VALUE texts, parsed into options.strategy_options by ToTuneOptions.
  std::vector<std::string> strategy_options;
  /// --cost-model-option KEY=VALUE texts, parsed into options.pretrained_options by
  /// ToTuneOptions (costmodel::SetPretrainedOption).
  std::vector<std::string> cost_model_options;
  /// --input NAME=D1xD2x... texts (repeatable): the shapes of an ONNX model's inputs, for its
  /// symbolic dimensions (graph::ParseInputShape reads them; LoadModel refuses them for other
  /// models).
  std::vector<std::string> inputs;
  /// The family of the command's --target ("llvm", "cuda"), set by the command before
  /// ToTuneOptions: a --cost-model artifact of another family is refused. "" = not checked.
  std::string target_family;
};

/// Adds the measurement flags, each writing into `protocol`, which must outlive the parse: the
/// measurement timeout named `timeout_flag`, --build-timeout, --repeats, --min-repeat-ms,
/// --flush-cache and --interleave.
void AddProtocolFlags(CLI::App& app, measure::MeasureProtocol& protocol, const std::string& timeout_flag = "--timeout");
/// Adds --trials, --total-trials, --batch, --seed, --strategy, --strategy-option,
/// --task-scheduler, --cost-model, --cost-model-option, --input and AddProtocolFlags' flags, with the measurement
/// timeout named `timeout_flag` (`tune submit` has --timeout for its calls to the daemon), each
/// writing into `flags`, which must outlive the parse.
void AddTuningFlags(CLI::App& app, TuningFlags& flags, const std::string& timeout_flag = "--timeout");
/// Adds --layout, nchw (the default) or nchwc, writing into `layout`, which must outlive the
/// parse; its help is "activation layout: nchw (default), or nchwc (CPU only): " and `what`
/// the nchwc layout means to the command. LayoutBlock (tuner/model_file.h) reads the value.
void AddLayoutFlag(CLI::App& app, std::string& layout, const std::string& what);

/// OK when a run of `tasks` tasks with `options`' budget can be counted: --trials, --batch and
/// --total-trials within their flags' ranges, and trials per task x tasks within an int (what
/// the tuning loop counts in). Otherwise InvalidArgument naming the flag and the numbers, e.g.
/// "--trials 1000000 x 3000 tasks is 3000000000 trials, more than one run can count
/// (2147483647); lower --trials or tune fewer tasks per run". Never lets a budget wrap to 0.
absl::Status CheckTrialBudget(const TuneOptions& options, size_t tasks);

/// `flags.options` with the strategy options parsed, once every name is checked:
/// InvalidArgument (or NotFound) naming a bad strategy option, strategy, task scheduler or
/// cost model. A --cost-model that names a .tcm file (costmodel::LooksLikeArtifactPath) is
/// read and checked here (UsePretrained), before anything is written: the result has it as
/// `pretrained` and cost_model "auto" (the strategy's default online model).
absl::StatusOr<TuneOptions> ToTuneOptions(const TuningFlags& flags);

/// Parses `artifact` (the bytes of a .tcm file, from `source`: its path, for messages) into
/// `options->pretrained` and `options->pretrained_note` ("cost model SOURCE: KIND, created
/// TIME, trained on TARGET", and "(not used: ...)" when `options->strategy` and cost_model use
/// no model). InvalidArgument with one line for bytes that are not an artifact
/// this build reads (corrupt, truncated, another version, an unknown kind) or, when
/// `target_family` is not "", an artifact of another target family.
absl::Status UsePretrained(const std::string& artifact, const std::string& source, const std::string& target_family,
                           TuneOptions* options);

}  // namespace tune::tuner
