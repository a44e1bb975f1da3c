// The runtime of an exported CPU library (tune_runtime.cc) is tune's kernel runtime itself
// (codegen/runtime/runtime.cc), compiles alone as C++17 and keeps the library's thread-count
// and packed-weight calls.
#include <random>
#include <string>

#include "codegen/ir/workload.h"
#include "codegen/runtime/runtime.h"
#include "exporter/library_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/test_seed.h"
#include "tests/exporter/export_test_helpers.h"

namespace tune::exporter_test {
namespace {

using ::testing::HasSubstr;

/// A CPU library of one matmul kernel (no object code: only the sources are used) whose target
/// has `threads` threads.
exporter::ExportedLibrary RuntimeTestLibrary(int threads) {
  exporter::ExportedLibrary library;
  library.model = "runtime-test";
  library.target = CpuTarget("x86-64", "", threads);
  exporter::ExportedKernel k;
  k.function = "tune_mm";
  k.symbol = "tune_mm_kernel";
  k.layer = "mm";
  auto w = codegen::Workload::Parse(codegen::OpKind::kMatmul, "8,20,12");
  EXPECT_TRUE(w.ok()) << w.status();
  if (w.ok()) k.workload = *w;
  library.kernels.push_back(k);
  return library;
}

std::string RuntimeFileOf(const std::vector<exporter::LibraryFile>& files, const std::string& path) {
  for (const exporter::LibraryFile& f : files) {
    if (f.path == path) return f.bytes;
  }
  ADD_FAILURE() << "no " << path << " among the library's files";
  return "";
}

TEST(ExportRuntimeTest, RuntimeIsTheKernelRuntimeSourceOfThisBuild) {
  std::mt19937_64 rng = test::TestRng(41);
  const int threads = std::uniform_int_distribution<int>(1, 8)(rng);
  const std::string runtime = RuntimeFileOf(exporter::LibraryFiles(RuntimeTestLibrary(threads)), "tune_runtime.cc");
  ASSERT_FALSE(runtime.empty());
  const std::string dir = std::string(TUNE_SOURCE_DIR) + "/codegen/runtime/";
  const std::string source = test::ReadFileBytes(dir + "runtime.cc");
  std::string header = test::ReadFileBytes(dir + "runtime.h");
  ASSERT_FALSE(source.empty());
  ASSERT_FALSE(header.empty());
  // runtime.cc whole, its #include of runtime.h replaced by runtime.h's text (less #pragma once).
  const std::string include = "#include \"codegen/runtime/runtime.h\"\n";
  const size_t at = source.find(include);
  ASSERT_NE(at, std::string::npos);
  const std::string pragma = "#pragma once\n";
  ASSERT_NE(header.find(pragma), std::string::npos);
  header.erase(header.find(pragma), pragma.size());
  EXPECT_THAT(runtime, HasSubstr(source.substr(0, at)));
  EXPECT_THAT(runtime, HasSubstr(header));
  EXPECT_THAT(runtime, HasSubstr(source.substr(at + include.size())));
  EXPECT_EQ(runtime.find(include), std::string::npos);
  EXPECT_EQ(runtime.find("#pragma once"), std::string::npos);
  EXPECT_THAT(runtime, HasSubstr("\n#define TUNE_RT_DEFAULT_THREADS " + std::to_string(threads) + "\n"));
}

/// A program over the exported runtime alone: the default threads are the target's, the spin
/// setting is the kernel runtime's, a parallel loop on several threads visits every index once
/// (and nested ones run serially), and a packed weight is fresh once, then kept, then fresh
/// again after tune_kernels_forget_packed_weights. Exits with the number of the failed check.
constexpr const char* kRuntimeCheckProgram = R"(#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tune_kernels.h"

namespace tune::codegen::runtime {
int SpinMicros();
}
extern "C" {
void tune_rt_parallel_for(int64_t n, void (*body)(int64_t, void*), void* closure);
void* tune_rt_alloc(int64_t bytes);
void tune_rt_free(void* ptr);
void* tune_rt_prepacked(const char* kernel_id, const void* weight, int64_t bytes, int* fresh);
void tune_rt_prepacked_release(void* buffer);
}

static std::vector<std::atomic<int>>* g_visits;

static void Visit(int64_t i, void*) {
  (*g_visits)[static_cast<size_t>(i)].fetch_add(1);
  tune_rt_parallel_for(2, [](int64_t, void*) {}, nullptr);  // nested: serial
  void* p = tune_rt_alloc(100);
  if (reinterpret_cast<uintptr_t>(p) % 64 != 0) std::abort();
  tune_rt_free(p);
}

int main(int argc, char** argv) {
  if (tune_kernels_threads() != std::atoi(argv[1])) return 2;
  if (tune::codegen::runtime::SpinMicros() != std::atoi(argv[2])) return 3;
  tune_kernels_set_threads(std::atoi(argv[3]));
  if (tune_kernels_threads() != std::atoi(argv[3])) return 4;
  const int64_t n = std::atoll(argv[4]);
  std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
  g_visits = &visits;
  for (int round = 0; round < 50; ++round) {
    tune_rt_parallel_for(n, Visit, nullptr);
    for (auto& v : visits) {
      if (v.exchange(0) != 1) return 5;
    }
  }
  float weight[16] = {};
  int fresh = -1;
  void* a = tune_rt_prepacked("k", weight, sizeof weight, &fresh);
  if (fresh != 1 || reinterpret_cast<uintptr_t>(a) % 64 != 0) return 6;
  tune_rt_prepacked_release(a);
  void* b = tune_rt_prepacked("k", weight, sizeof weight, &fresh);
  if (fresh != 0 || b != a) return 7;
  tune_rt_prepacked_release(b);
  tune_kernels_forget_packed_weights();
  void* c = tune_rt_prepacked("k", weight, sizeof weight, &fresh);
  if (fresh != 1) return 8;
  tune_rt_prepacked_release(c);
  return 0;
}
)";

TEST(ExportRuntimeTest, RuntimeCompilesAloneAndRunsLoopsAndPackedWeights) {
  std::mt19937_64 rng = test::TestRng(43);
  const int threads = std::uniform_int_distribution<int>(1, 4)(rng);
  const int set_threads = std::uniform_int_distribution<int>(2, 4)(rng);
  const int64_t n = std::uniform_int_distribution<int64_t>(1, 300)(rng);
  test::TempDir dir;
  const std::vector<exporter::LibraryFile> files = exporter::LibraryFiles(RuntimeTestLibrary(threads));
  test::WriteFileBytes(dir.Join("tune_kernels.h"), RuntimeFileOf(files, "tune_kernels.h"));
  test::WriteFileBytes(dir.Join("tune_runtime.cc"), RuntimeFileOf(files, "tune_runtime.cc"));
  test::WriteFileBytes(dir.Join("check.cc"), kRuntimeCheckProgram);
  test::ProcessResult c = RunShell(dir.path(), "c++ -std=c++17 -O1 -Wall -Werror -I . check.cc tune_runtime.cc "
                                               "-lpthread -o check");
  ASSERT_TRUE(c.exited && c.exit_code == 0) << c;
  test::ProcessResult run = test::RunProcess({dir.Join("check"), std::to_string(threads), std::to_string(codegen::runtime::kDefaultSpinMicros),
                                              std::to_string(set_threads), std::to_string(n)},
                                             dir.path());
  EXPECT_TRUE(run.exited && run.exit_code == 0) << run << " (threads " << threads << " -> " << set_threads
                                                << ", n " << n << ")";
}

}  // namespace
}  // namespace tune::exporter_test
