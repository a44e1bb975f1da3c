// Export: a model's best kernels on one target, as a library that builds and links without tune.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/cuda/cuda_codegen.h"
#include "codegen/ir/workload.h"
#include "measure/target.h"

namespace tune::exporter {

/// What `tune export` was asked for.
struct ExportRequest {
  std::string db_path;     // the record database (must exist)
  std::string model;       // a zoo name, a model file or an ONNX model (tuner::LoadModel)
  std::vector<std::string> inputs;  // ONNX input shapes, "NAME=1x3x224x224" (--input)
  /// "llvm" (this CPU with `threads`, keyed as `tune MODEL --target llvm` keys it), "cuda" or
  /// "cuda:N" (GPU N, which must be present); ignored when `target_key` is set.
  std::string target = "llvm";
  /// A target of the database by its key or id: exports for a device that need not be here.
  std::string target_key;
  int threads = 1;         // kernel threads of target "llvm" (part of its key)
  /// "nchw", or "nchwc" (CPU targets only): the model's convolutions as their NCHWc workloads,
  /// as `tune MODEL --layout nchwc` tuned them and `tune run --layout nchwc` runs them.
  std::string layout = "nchw";
  std::string out_dir;     // the library's directory, written whole or not at all
  bool force = false;      // replace `out_dir` when it exists and is not empty
};

/// One task of the model as exported: its kernel and where its schedule came from.
struct ExportedKernel {
  std::string function;     // the C function the library exports, e.g. "tune_conv1"
  std::string symbol;       // the kernel's own symbol, called by `function`
  std::string layer;        // the model's (first) layer with this workload
  int count = 1;            // layers of the model that share the workload
  codegen::Workload workload;
  std::string template_name;
  int template_version = 0;
  std::string config_json;  // search::ConfigSpace::ToJson of the schedule
  bool tuned = false;       // from the best ok record on the target; else the default schedule
  int64_t record_id = 0;    // the record (tuned only)
  double time_s = 0;        // the record's median seconds per call (tuned only)
  std::string strategy;     // who proposed the record's config (tuned only)
  std::string object_code;  // CPU: the ELF object defining `symbol`
  codegen::CudaKernel cuda; // CUDA: the kernel's source (entry `symbol`) and launch shape
};

/// A model's kernels for one target, ready to be written out.
struct ExportedLibrary {
  std::string model;            // the model's name
  measure::Target target;       // as the database describes it
  int64_t target_id = 0;        // its id in the database
  std::vector<ExportedKernel> kernels;  // in the model's task order
};

/// Selects the target and every task's schedule and compiles the kernels (CPU objects for the
/// CPU of the target key, LLVM name and features from it; CUDA C for the key's arch); writes
/// nothing. InvalidArgument/NotFound/FailedPrecondition (exit 2) for an unknown model, a
/// database that does not open, a target missing from it or a CPU LLVM does not know; the
/// template's error when a task has no valid default config; Internal when compiling fails.
absl::StatusOr<ExportedLibrary> BuildLibrary(const ExportRequest& request);

/// Checks `request.out_dir` (FailedPrecondition when it exists, is not empty and `force` is
/// off, or is not a directory), then builds the library and writes it there: under a
/// temporary name beside it, renamed into place at the end, so a failure leaves nothing and
/// an old directory replaced with `force` stays whole until then.
absl::StatusOr<ExportedLibrary> Export(const ExportRequest& request);

}  // namespace tune::exporter
