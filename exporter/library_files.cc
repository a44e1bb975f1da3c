// The text of an exported library's files, from its kernels and the target they were tuned on.
#include "exporter/library_files.h"

#include <cmath>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "codegen/cuda/nvrtc.h"
#include "exporter/runtime_text.h"  // generated: kRuntimeHeaderText, kRuntimeSourceText
#include "nlohmann/json.hpp"

#ifndef TUNE_EXPORT_COMMIT
#define TUNE_EXPORT_COMMIT "unknown"
#endif

namespace tune::exporter {
namespace {

bool IsCuda(const ExportedLibrary& library) { return library.target.kind == "cuda"; }

/// The kernel's tensors: its inputs in argument order, then its output.
std::vector<codegen::TensorSpec> Tensors(const codegen::Workload& w) {
  std::vector<codegen::TensorSpec> tensors = w.Inputs();
  tensors.push_back(w.Output());
  return tensors;
}

std::string Dims(const std::vector<int64_t>& shape, const char* sep) { return absl::StrJoin(shape, sep); }

/// "+ bias + relu" and so on: what the kernel applies after the operator.
std::string Epilogue(const codegen::Workload& w) {
  std::string out;
  if (w.bias) out += " + bias";
  if (w.relu) out += ", relu";
  if (w.relu6) out += ", relu6 (min(max(x, 0), 6))";
  return out;
}

/// Seconds as the header prints them: "0.0123 ms".
std::string Ms(double seconds) {
  std::ostringstream os;
  os.precision(4);
  os << seconds * 1e3 << " ms";
  return os.str();
}

/// The C parameter list of a kernel's function: `const float* data, ..., float* out`.
std::string Params(const codegen::Workload& w) {
  std::vector<std::string> params;
  for (const codegen::TensorSpec& t : w.Inputs()) params.push_back("const float* " + t.name);
  params.push_back("float* " + w.Output().name);
  return absl::StrJoin(params, ", ");
}

std::string Header(const ExportedLibrary& library) {
  const bool cuda = IsCuda(library);
  std::ostringstream os;
  os << "// tune_kernels.h: the kernels of model \"" << library.model << "\" tuned for " << library.target.Key()
     << ",\n// exported by tune (commit " << TuneCommit() << "). manifest.json lists each kernel's schedule.\n"
     << "#ifndef TUNE_KERNELS_H_\n#define TUNE_KERNELS_H_\n\n#include <stdint.h>\n";
  if (cuda) os << "\n#include <cuda_runtime_api.h>\n";
  os << "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  if (cuda) {
    os << "/* Every function takes fp32 row-major tensors in device memory, 16-byte aligned at least (as\n"
          " * cudaMalloc returns them), enqueues its kernel on `stream` and returns 0 (cudaSuccess) or the\n"
          " * cudaError_t of the launch: cudaErrorInvalidValue for a null or misaligned pointer. The first\n"
          " * call of a function on a device raises its shared-memory limit when needed and allocates its\n"
          " * scratch memory there (zeroed, then synchronised), once. Functions whose kernel has scratch\n"
          " * memory (said below) must not run concurrently with themselves: keep their calls on one stream. */\n\n";
  } else {
    os << "/* Every function takes fp32 row-major tensors (4-byte aligned; the kernels were measured on\n"
          " * 64-byte aligned ones), writes the whole output and returns 0, or -1 when a pointer is null.\n"
          " * Parallel loops run on the library's thread pool (tune_kernels_set_threads); functions may be\n"
          " * called from several threads at once (a call that finds the pool busy runs on its own thread). */\n\n";
  }
  for (const ExportedKernel& k : library.kernels) {
    const codegen::Workload& w = k.workload;
    os << "/// " << w.Label() << Epilogue(w) << ": layer \"" << k.layer << "\"";
    if (k.count > 1) os << " (" << k.count << " layers of the model)";
    os << ".\n/// Schedule: " << (k.tuned ? absl::StrCat("record ", k.record_id, ", ", Ms(k.time_s), " measured")
                                         : std::string("the template's default (no record on this target)"));
    if (cuda && !k.cuda.scratch.empty()) os << "; has scratch memory";
    os << ".\n";
    for (const codegen::TensorSpec& t : Tensors(w)) {
      os << "///   " << t.name << std::string(t.name.size() < 7 ? 7 - t.name.size() : 1, ' ') << "[" << Dims(t.shape, ", ")
         << "]\n";
    }
    os << "int " << k.function << "(" << Params(w) << (cuda ? ", cudaStream_t stream" : "") << ");\n\n";
  }
  os << "/// The number of kernels in this library (" << library.kernels.size() << ").\n"
     << "int tune_kernels_count(void);\n"
     << "/// The function name of kernel `index` (\"" << library.kernels[0].function
     << "\"); NULL when `index` is out of range.\n"
     << "const char* tune_kernels_name(int index);\n"
     << "/// The inputs kernel `index` takes (2, or 3 with a bias); -1 when `index` is out of range.\n"
     << "int tune_kernels_num_inputs(int index);\n"
     << "/// The shape of tensor `tensor` of kernel `index` (0 .. num_inputs - 1: its inputs in argument\n"
     << "/// order; num_inputs: its output): writes its extents to dims[0 .. rank) (at most 5) and returns\n"
     << "/// the rank; -1 when `index` or `tensor` is out of range or `dims` is null.\n"
     << "int tune_kernels_shape(int index, int tensor, int64_t* dims);\n";
  if (cuda) {
    os << "/// Runs kernel `index` on inputs[0 .. num_inputs) and `out` as its function does; -1 for an index\n"
       << "/// out of range or a null `inputs`.\n"
       << "int tune_kernels_run(int index, const float* const* inputs, float* out, cudaStream_t stream);\n"
       << "/// Frees every function's scratch memory (the next call allocates it again). Call it only when\n"
       << "/// no kernel of this library is running.\n"
       << "void tune_kernels_release(void);\n";
  } else {
    os << "/// Runs kernel `index` on inputs[0 .. num_inputs) and `out` as its function does; -1 for an index\n"
       << "/// out of range or a null pointer.\n"
       << "int tune_kernels_run(int index, const float* const* inputs, float* out);\n"
       << "/// Threads the kernels' parallel loops use (at least 1); the default, "
       << library.target.threads << ", is what they were\n"
       << "/// tuned with.\n"
       << "void tune_kernels_set_threads(int threads);\n"
       << "int tune_kernels_threads(void);\n"
       << "/// Kernels whose schedule has \"prepack\": 1 (manifest.json) pack their weight on their first\n"
       << "/// call for that weight's address and reuse the packed copy on later calls, as for a model's\n"
       << "/// constant weights. Call this after writing new values into a weight at the same address (no\n"
       << "/// call of a kernel may run meanwhile): every weight is packed again on its next call.\n"
       << "void tune_kernels_forget_packed_weights(void);\n";
  }
  os << "\n#ifdef __cplusplus\n}  /* extern \"C\" */\n#endif\n\n#endif  /* TUNE_KERNELS_H_ */\n";
  return os.str();
}

/// The table of kernels both entry-point files share: name, inputs, tensor shapes.
std::string ShapeInitializer(const codegen::Workload& w) {
  std::vector<std::string> ranks, dims;
  for (const codegen::TensorSpec& t : Tensors(w)) {
    ranks.push_back(std::to_string(t.shape.size()));
    dims.push_back(absl::StrCat("{", Dims(t.shape, ", "), "}"));
  }
  return absl::StrCat(w.Inputs().size(), ", {", absl::StrJoin(ranks, ", "), "}, {", absl::StrJoin(dims, ", "), "}");
}

/// The generic entry by index and the shape queries, the same for both kinds.
constexpr const char* kGenericEntry = R"(extern "C" int tune_kernels_count(void) { return kNumKernels; }

extern "C" const char* tune_kernels_name(int index) {
  return index >= 0 && index < kNumKernels ? kKernels[index].name : nullptr;
}

extern "C" int tune_kernels_num_inputs(int index) {
  return index >= 0 && index < kNumKernels ? kKernels[index].num_inputs : -1;
}

extern "C" int tune_kernels_shape(int index, int tensor, int64_t* dims) {
  if (index < 0 || index >= kNumKernels || dims == nullptr) return -1;
  const Kernel& k = kKernels[index];
  if (tensor < 0 || tensor > k.num_inputs) return -1;
  for (int d = 0; d < k.rank[tensor]; ++d) dims[d] = k.dims[tensor][d];
  return k.rank[tensor];
}
)";

std::string CpuEntryPoints(const ExportedLibrary& library) {
  std::ostringstream os;
  os << "// Entry points of the exported kernels: one C function per task, and the kernels by index.\n"
     << "#include <cstdint>\n\n#include \"tune_kernels.h\"\n\n"
     << "// The kernels (objects/*.o): `args` holds the inputs in argument order, then the output.\nextern \"C\" {\n";
  for (const ExportedKernel& k : library.kernels) os << "void " << k.symbol << "(float* const* args);\n";
  os << "}\n\nnamespace {\n\n"
     << "struct Kernel {\n"
     << "  const char* name;\n"
     << "  void (*fn)(float* const* args);\n"
     << "  int num_inputs;\n"
     << "  int rank[4];         // the inputs' ranks, then the output's\n"
     << "  int64_t dims[4][5];  // their extents (an NCHWc tensor has 5)\n"
     << "};\n\n"
     << "const Kernel kKernels[] = {\n";
  for (const ExportedKernel& k : library.kernels) {
    os << "    {\"" << k.function << "\", " << k.symbol << ", " << ShapeInitializer(k.workload) << "},\n";
  }
  os << "};\nconstexpr int kNumKernels = static_cast<int>(sizeof(kKernels) / sizeof(kKernels[0]));\n\n"
     << "int Run(const Kernel& k, const float* const* inputs, float* out) {\n"
     << "  float* args[4];\n"
     << "  for (int i = 0; i < k.num_inputs; ++i) {\n"
     << "    if (inputs[i] == nullptr) return -1;\n"
     << "    args[i] = const_cast<float*>(inputs[i]);  // kernels never write their inputs\n"
     << "  }\n"
     << "  if (out == nullptr) return -1;\n"
     << "  args[k.num_inputs] = out;\n"
     << "  k.fn(args);\n"
     << "  return 0;\n"
     << "}\n\n}  // namespace\n\n";
  for (size_t i = 0; i < library.kernels.size(); ++i) {
    const ExportedKernel& k = library.kernels[i];
    std::vector<std::string> names;
    for (const codegen::TensorSpec& t : k.workload.Inputs()) names.push_back(t.name);
    os << "extern \"C\" int " << k.function << "(" << Params(k.workload) << ") {\n"
       << "  const float* inputs[] = {" << absl::StrJoin(names, ", ") << "};\n"
       << "  return Run(kKernels[" << i << "], inputs, " << k.workload.Output().name << ");\n}\n\n";
  }
  os << kGenericEntry << "\n"
     << "extern \"C\" int tune_kernels_run(int index, const float* const* inputs, float* out) {\n"
     << "  if (index < 0 || index >= kNumKernels || inputs == nullptr) return -1;\n"
     << "  return Run(kKernels[index], inputs, out);\n}\n";
  return os.str();
}

/// tune_runtime.cc: the kernel runtime tune measured the kernels with (codegen/runtime/runtime.cc,
/// its header in place of its #include), defaulting to the threads they were tuned with, and
/// the library's calls that set its threads and forget its packed weights.
std::string CpuRuntime(const ExportedLibrary& library) {
  std::string header = kRuntimeHeaderText;
  const std::string pragma = "#pragma once\n";
  const size_t at_pragma = header.find(pragma);
  TUNE_CHECK(at_pragma != std::string::npos);
  header.erase(at_pragma, pragma.size());
  std::string source = kRuntimeSourceText;
  const std::string include = "#include \"codegen/runtime/runtime.h\"\n";
  const size_t at_include = source.find(include);
  TUNE_CHECK(at_include != std::string::npos);
  source.replace(at_include, include.size(),
                 absl::StrCat("\n// ---- runtime.h\n", header, "// ---- end of runtime.h\n"));
  std::ostringstream os;
  os << "// Runtime of the exported kernels: the thread pool their parallel loops run on, the 64-byte\n"
     << "// aligned scratch memory they allocate (packed weights, padded inputs) and the weights packed\n"
     << "// once and kept across calls (schedules with prepack). C++17. Below the first line of dashes,\n"
     << "// up to the last, the kernel runtime of tune (commit " << TuneCommit()
     << ") that measured the kernels:\n"
     << "// codegen/runtime/runtime.cc, with codegen/runtime/runtime.h in place of its #include.\n\n"
     << "// The threads the kernels were tuned with: the pool's default (tune_kernels_set_threads).\n"
     << "#define TUNE_RT_DEFAULT_THREADS " << library.target.threads << "\n\n"
     << "#include \"tune_kernels.h\"\n\n"
     << "// -------------------------------------------------------------------------------------------\n"
     << source
     << "// -------------------------------------------------------------------------------------------\n\n"
     << "extern \"C\" void tune_kernels_set_threads(int threads) { tune::codegen::runtime::SetNumThreads(threads); }\n\n"
     << "extern \"C\" int tune_kernels_threads(void) { return tune::codegen::runtime::NumThreads(); }\n\n"
     << "extern \"C\" void tune_kernels_forget_packed_weights(void) { tune_rt_prepacked_reset(); }\n";
  return os.str();
}

/// CMake's names of the processors the objects of this build run on.
const char* ProcessorPattern() {
#if defined(__x86_64__)
  return "x86_64|AMD64|amd64";
#elif defined(__aarch64__)
  return "aarch64|arm64|ARM64";
#else
  return "";
#endif
}

std::string CpuCMakeLists(const ExportedLibrary& library) {
  std::ostringstream os;
  os << "# tune_kernels: the kernels of model \"" << library.model << "\" tuned for\n# " << library.target.Key()
     << ", exported by tune (commit " << TuneCommit() << ").\n"
     << "# Standalone: cmake -S . -B build && cmake --build build; or add_subdirectory() it and link tune_kernels.\n"
     << "cmake_minimum_required(VERSION 3.16)\nproject(tune_kernels LANGUAGES CXX)\n\n";
  if (*ProcessorPattern() != '\0') {
    os << "if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES \"^(" << ProcessorPattern() << ")$\")\n"
       << "  message(FATAL_ERROR \"tune_kernels: the objects are " << library.target.cpu << " code, not for \"\n"
       << "                      \"${CMAKE_SYSTEM_PROCESSOR}\")\nendif()\n\n";
  }
  os << "find_package(Threads REQUIRED)\n\n"
     << "# One object per kernel, compiled by LLVM for " << library.target.cpu << " (" << library.target.features
     << ").\nset(TUNE_KERNEL_OBJECTS\n";
  for (const ExportedKernel& k : library.kernels) {
    os << "    ${CMAKE_CURRENT_SOURCE_DIR}/objects/" << k.function << ".o\n";
  }
  os << ")\nset_source_files_properties(${TUNE_KERNEL_OBJECTS} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED FALSE)\n\n"
     << "add_library(tune_kernels STATIC tune_kernels.cc tune_runtime.cc ${TUNE_KERNEL_OBJECTS})\n"
     << "target_compile_features(tune_kernels PRIVATE cxx_std_17)\n"
     << "set_target_properties(tune_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON)\n"
     << "target_include_directories(tune_kernels PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})\n"
     << "target_link_libraries(tune_kernels PUBLIC Threads::Threads)\n";
  return os.str();
}

/// The helpers a kernel's source declares before its entry (the cp.async helpers), and the rest.
std::pair<std::string, std::string> SplitPreamble(const std::string& source) {
  const size_t entry = source.find("extern \"C\" __global__");
  if (entry == std::string::npos) return {"", source};
  std::string comments, preamble;
  std::istringstream in(source.substr(0, entry));
  for (std::string line; std::getline(in, line);) (line.rfind("//", 0) == 0 ? comments : preamble) += line + "\n";
  return {preamble, comments + source.substr(entry)};
}

std::string CudaKernels(const ExportedLibrary& library) {
  std::ostringstream os;
  os << "// The kernels of model \"" << library.model << "\" tuned for " << library.target.Key()
     << ",\n// exported by tune (commit " << TuneCommit() << "), and their host launchers.\n"
     << "// The kernels compile alone with NVRTC (__CUDACC_RTC__ hides the host part) or with nvcc.\n\n";
  std::set<std::string> preambles;
  for (const ExportedKernel& k : library.kernels) {
    std::string preamble = SplitPreamble(k.cuda.source).first;
    if (!preamble.empty() && preambles.insert(preamble).second) os << preamble << "\n";
  }
  for (const ExportedKernel& k : library.kernels) {
    os << "// " << k.function << ": " << k.workload.Label() << Epilogue(k.workload) << " (layer \"" << k.layer
       << "\")\n"
       << SplitPreamble(k.cuda.source).second << "\n";
  }
  os << "#ifndef __CUDACC_RTC__\n\n#include <cstdint>\n#include <mutex>\n\n#include <cuda_runtime.h>\n\n"
     << "#include \"tune_kernels.h\"\n\nnamespace {\n\n"
     << "constexpr int kMaxScratch = 4;\n\n"
     << "struct Scratch {\n"
     << "  size_t bytes;\n"
     << "  bool zero_init;  // zeroed once; each launch leaves it zero again\n"
     << "};\n\n"
     << "struct Kernel {\n"
     << "  const char* name;\n"
     << "  const void* fn;\n"
     << "  int num_inputs;\n"
     << "  int rank[4];         // the inputs' ranks, then the output's\n"
     << "  int64_t dims[4][5];  // their extents (an NCHWc tensor has 5)\n"
     << "  unsigned grid[3], block[3];\n"
     << "  size_t shared_bytes;  // dynamic shared memory per block\n"
     << "  int num_scratch;\n"
     << "  Scratch scratch[kMaxScratch];\n"
     << "};\n\n"
     << "const Kernel kKernels[] = {\n";
  for (const ExportedKernel& k : library.kernels) {
    const codegen::CudaKernel& c = k.cuda;
    std::vector<std::string> scratch;
    for (const codegen::CudaScratch& s : c.scratch) {
      scratch.push_back(absl::StrCat("{", s.bytes, ", ", s.zero_init ? "true" : "false", "}"));
    }
    os << "    {\"" << k.function << "\", reinterpret_cast<const void*>(" << k.symbol << "), "
       << ShapeInitializer(k.workload) << ",\n     {" << absl::StrJoin(c.grid, ", ") << "}, {"
       << absl::StrJoin(c.block, ", ") << "}, " << c.shared_bytes << ", " << c.scratch.size() << ", {"
       << absl::StrJoin(scratch, ", ") << "}},\n";
  }
  os << R"(};
constexpr int kNumKernels = static_cast<int>(sizeof(kKernels) / sizeof(kKernels[0]));

// What the first call of a kernel sets up, once per process.
struct State {
  std::mutex mu;
  bool ready = false;
  void* scratch[kMaxScratch] = {};
};
State g_states[kNumKernels];

cudaError_t Prepare(int index) {
  const Kernel& k = kKernels[index];
  State& s = g_states[index];
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.ready) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  if (k.shared_bytes > 48 * 1024) {
    err = cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(k.shared_bytes));
    if (err != cudaSuccess) return err;
  }
  for (int j = 0; j < k.num_scratch; ++j) {
    if (s.scratch[j] == nullptr) err = cudaMalloc(&s.scratch[j], k.scratch[j].bytes);
    if (err == cudaSuccess && k.scratch[j].zero_init) err = cudaMemset(s.scratch[j], 0, k.scratch[j].bytes);
    if (err != cudaSuccess) return err;
  }
  if (k.num_scratch > 0 && (err = cudaDeviceSynchronize()) != cudaSuccess) return err;
  s.ready = true;
  return cudaSuccess;
}

bool Aligned(const void* p) { return p != nullptr && reinterpret_cast<uintptr_t>(p) % 16 == 0; }

int Launch(int index, const float* const* inputs, float* out, cudaStream_t stream) {
  const Kernel& k = kKernels[index];
  const void* ptrs[4 + kMaxScratch];
  for (int i = 0; i < k.num_inputs; ++i) {
    if (!Aligned(inputs[i])) return cudaErrorInvalidValue;
    ptrs[i] = inputs[i];
  }
  if (!Aligned(out)) return cudaErrorInvalidValue;
  ptrs[k.num_inputs] = out;
  if (cudaError_t err = Prepare(index); err != cudaSuccess) return err;
  const int num_args = k.num_inputs + 1 + k.num_scratch;
  for (int j = 0; j < k.num_scratch; ++j) ptrs[k.num_inputs + 1 + j] = g_states[index].scratch[j];
  void* args[4 + kMaxScratch];
  for (int a = 0; a < num_args; ++a) args[a] = &ptrs[a];
  return cudaLaunchKernel(k.fn, dim3(k.grid[0], k.grid[1], k.grid[2]), dim3(k.block[0], k.block[1], k.block[2]),
                          args, k.shared_bytes, stream);
}

}  // namespace

)";
  for (size_t i = 0; i < library.kernels.size(); ++i) {
    const ExportedKernel& k = library.kernels[i];
    std::vector<std::string> names;
    for (const codegen::TensorSpec& t : k.workload.Inputs()) names.push_back(t.name);
    os << "extern \"C\" int " << k.function << "(" << Params(k.workload) << ", cudaStream_t stream) {\n"
       << "  const float* inputs[] = {" << absl::StrJoin(names, ", ") << "};\n"
       << "  return Launch(" << i << ", inputs, " << k.workload.Output().name << ", stream);\n}\n\n";
  }
  os << kGenericEntry << R"(
extern "C" int tune_kernels_run(int index, const float* const* inputs, float* out, cudaStream_t stream) {
  if (index < 0 || index >= kNumKernels || inputs == nullptr) return -1;
  return Launch(index, inputs, out, stream);
}

extern "C" void tune_kernels_release(void) {
  for (State& s : g_states) {
    std::lock_guard<std::mutex> lock(s.mu);
    for (void*& p : s.scratch) {
      if (p != nullptr) cudaFree(p);
      p = nullptr;
    }
    s.ready = false;
  }
}

#endif  // __CUDACC_RTC__
)";
  return os.str();
}

/// "sm_90" -> "90", "sm_90a" -> "90a": CMake's CUDA_ARCHITECTURES.
std::string CmakeArch(const std::string& arch) { return arch.rfind("sm_", 0) == 0 ? arch.substr(3) : arch; }

std::string CudaCMakeLists(const ExportedLibrary& library) {
  std::ostringstream os;
  os << "# tune_kernels: the kernels of model \"" << library.model << "\" tuned for\n# " << library.target.Key()
     << ", exported by tune (commit " << TuneCommit() << ").\n"
     << "# Standalone: cmake -S . -B build && cmake --build build; or add_subdirectory() it and link tune_kernels.\n"
     << "cmake_minimum_required(VERSION 3.18)\nproject(tune_kernels LANGUAGES CXX CUDA)\n\n"
     << "find_package(CUDAToolkit REQUIRED)\n\n"
     << "add_library(tune_kernels STATIC kernels.cu)\n"
     << "# The architecture the kernels were tuned for (" << library.target.cpu << ").\n"
     << "set_target_properties(tune_kernels PROPERTIES CUDA_ARCHITECTURES " << CmakeArch(library.target.cpu)
     << " POSITION_INDEPENDENT_CODE ON)\n"
     << "target_compile_features(tune_kernels PRIVATE cxx_std_17 cuda_std_17)\n"
     << "target_include_directories(tune_kernels PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})\n"
     << "target_link_libraries(tune_kernels PUBLIC CUDA::cudart)\n";
  return os.str();
}

}  // namespace

std::string TuneCommit() { return TUNE_EXPORT_COMMIT; }

std::string ManifestJson(const ExportedLibrary& library) {
  const measure::Target& t = library.target;
  nlohmann::json target = {{"key", t.Key()},         {"id", library.target_id}, {"kind", t.kind},
                           {"cpu", t.cpu},           {"features", t.features},  {"device_model", t.device_model},
                           {"toolkit", t.toolkit},   {"threads", t.threads}};
  nlohmann::json kernels = nlohmann::json::array();
  for (size_t i = 0; i < library.kernels.size(); ++i) {
    const ExportedKernel& k = library.kernels[i];
    const codegen::Workload& w = k.workload;
    nlohmann::json inputs = nlohmann::json::array();
    for (const codegen::TensorSpec& s : w.Inputs()) inputs.push_back({{"name", s.name}, {"shape", s.shape}});
    const codegen::TensorSpec out = w.Output();
    nlohmann::json config = nlohmann::json::parse(k.config_json, nullptr, /*allow_exceptions=*/false);
    nlohmann::json entry = {
        {"index", i},
        {"function", k.function},
        {"symbol", k.symbol},
        {"layer", k.layer},
        {"count", k.count},
        {"op", codegen::OpName(w.op)},
        {"workload_key", w.Key()},
        {"label", w.Label()},
        {"inputs", inputs},
        {"output", {{"name", out.name}, {"shape", out.shape}}},
        {"bias", w.bias},
        {"relu", w.relu},
        {"relu6", w.relu6},
        {"flops", w.Flops()},
        {"target_key", t.Key()},
        {"template", {{"name", k.template_name}, {"version", k.template_version}}},
        {"config", config.is_discarded() ? nlohmann::json(k.config_json) : config},
        {"schedule", k.tuned ? "record" : "default"},
        {"record_id", k.tuned ? nlohmann::json(k.record_id) : nlohmann::json(nullptr)},
        {"time_s", k.tuned && std::isfinite(k.time_s) ? nlohmann::json(k.time_s) : nlohmann::json(nullptr)},
        {"strategy", k.tuned ? nlohmann::json(k.strategy) : nlohmann::json(nullptr)},
    };
    if (IsCuda(library)) {
      nlohmann::json scratch = nlohmann::json::array();
      for (const codegen::CudaScratch& s : k.cuda.scratch) {
        scratch.push_back({{"bytes", s.bytes}, {"zero_init", s.zero_init}});
      }
      entry["launch"] = {{"kernel", k.symbol},
                         {"grid", k.cuda.grid},
                         {"block", k.cuda.block},
                         {"shared_bytes", k.cuda.shared_bytes},
                         {"scratch", scratch}};
    } else {
      entry["object"] = "objects/" + k.function + ".o";
    }
    kernels.push_back(entry);
  }
  nlohmann::json tune = {{"commit", TuneCommit()}};
  if (IsCuda(library)) tune["nvrtc"] = codegen::NvrtcVersion();
  nlohmann::json manifest = {{"format", 1},      {"model", library.model}, {"tune", tune},
                             {"target", target}, {"kernels", kernels}};
  return manifest.dump(2) + "\n";
}

std::vector<LibraryFile> LibraryFiles(const ExportedLibrary& library) {
  std::vector<LibraryFile> files;
  files.push_back({"tune_kernels.h", Header(library)});
  if (IsCuda(library)) {
    files.push_back({"kernels.cu", CudaKernels(library)});
    files.push_back({"CMakeLists.txt", CudaCMakeLists(library)});
  } else {
    files.push_back({"tune_kernels.cc", CpuEntryPoints(library)});
    files.push_back({"tune_runtime.cc", CpuRuntime(library)});
    files.push_back({"CMakeLists.txt", CpuCMakeLists(library)});
    for (const ExportedKernel& k : library.kernels) files.push_back({"objects/" + k.function + ".o", k.object_code});
  }
  files.push_back({"manifest.json", ManifestJson(library)});
  return files;
}

}  // namespace tune::exporter
