// The files of an exported library: header, entry points, runtime, kernels, CMakeLists, manifest.
#pragma once

#include <string>
#include <vector>

#include "exporter/exporter.h"

namespace tune::exporter {

/// One file of an exported library: its path relative to the library's directory ("/"
/// separated, folders included) and its bytes.
struct LibraryFile {
  std::string path;
  std::string bytes;
};

/// Every file of `library`'s directory. CPU (target kind "llvm"): tune_kernels.h,
/// tune_kernels.cc (the C functions), tune_runtime.cc (thread pool and scratch memory the
/// kernels call), objects/<function>.o, CMakeLists.txt (static library `tune_kernels`),
/// manifest.json. CUDA: tune_kernels.h, kernels.cu (the kernels, and host launchers outside
/// NVRTC), CMakeLists.txt (CUDA, CUDA::cudart), manifest.json.
std::vector<LibraryFile> LibraryFiles(const ExportedLibrary& library);

/// manifest.json: the model, the target, tune's commit and, per kernel, its function, layer,
/// workload key, op, tensor shapes, target key, template and version, config, where it came
/// from ("record" with the record id, median seconds and strategy, or "default" with nulls)
/// and, for CUDA, its launch (grid, block, dynamic shared bytes, scratch buffers).
std::string ManifestJson(const ExportedLibrary& library);

/// The commit of tune that wrote the library ("unknown" when the build did not know it).
std::string TuneCommit();

}  // namespace tune::exporter
