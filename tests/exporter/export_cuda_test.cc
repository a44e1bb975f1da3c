// `tune export` for a CUDA target tuned elsewhere (named by its key): default schedules for
// tasks without records, a recorded split-K schedule with its scratch memory; kernels.cu
// compiles with NVRTC (and nvcc where installed). No GPU needed.
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/measure_result.h"
#include "tests/common/test_seed.h"
#include "tests/exporter/export_test_helpers.h"

namespace tune::exporter_test {
namespace {

using ::testing::HasSubstr;

/// The mix model and a matmul with a long K, where split-K schedules are valid.
const std::string kCudaModel = std::string(kMixModel).substr(0, std::string(kMixModel).rfind(']')) +
                               R"(, {"name": "long_k", "op": "matmul", "shape": "16,32,512"}]}
)";

codegen::GpuLimits H100Limits() {
  const measure::Target t = H100Target();
  codegen::GpuLimits limits;
  limits.max_threads_per_block = t.max_threads_per_block;
  limits.max_shared_bytes_per_block = t.max_shared_per_block;
  limits.max_registers_per_block = t.registers_per_block;
  limits.multiprocessors = t.multiprocessors;
  return limits;
}

/// The CUDA kernel the exporter should have generated for `config` of `w`'s template.
codegen::CudaKernel ExpectedKernel(const codegen::Template& tmpl, const search::Config& config,
                                   const std::string& symbol) {
  auto func = tmpl.Lower(config, symbol);
  EXPECT_TRUE(func.ok()) << func.status();
  auto kernel = codegen::GenerateCuda(*func);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? *kernel : codegen::CudaKernel{};
}

void ExpectLaunch(const nlohmann::json& launch, const codegen::CudaKernel& want) {
  EXPECT_EQ(launch["grid"], nlohmann::json(want.grid));
  EXPECT_EQ(launch["block"], nlohmann::json(want.block));
  EXPECT_EQ(launch["shared_bytes"], want.shared_bytes);
  ASSERT_EQ(launch["scratch"].size(), want.scratch.size());
  for (size_t j = 0; j < want.scratch.size(); ++j) {
    EXPECT_EQ(launch["scratch"][j]["bytes"], want.scratch[j].bytes);
    EXPECT_EQ(launch["scratch"][j]["zero_init"], want.scratch[j].zero_init);
  }
}

/// kernels.cu of the library in `lib_dir` compiles with NVRTC for sm_90, one entry per
/// kernel of the manifest; and with nvcc (host launchers included) where nvcc is installed.
void CompileCudaLibrary(const std::string& lib_dir, const nlohmann::json& manifest) {
  const std::string source = test::ReadFileBytes(lib_dir + "/kernels.cu");
  ASSERT_FALSE(source.empty());
  if (codegen::NvrtcAvailable()) {
    auto compiled = codegen::CompileCuda(source, "sm_90");
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    EXPECT_FALSE(compiled->cubin.empty());
    EXPECT_EQ(compiled->kernels.size(), manifest["kernels"].size());
    for (const nlohmann::json& k : manifest["kernels"]) {
      EXPECT_EQ(compiled->kernels.count(k["symbol"].get<std::string>()), 1u) << k["symbol"];
    }
  }
  std::string nvcc;
  for (const char* path : {"/usr/local/cuda/bin/nvcc", "/usr/bin/nvcc"}) {
    if (std::filesystem::exists(path)) {
      nvcc = path;
      break;
    }
  }
  if (nvcc.empty()) return;
  test::ProcessResult r =
      RunShell(lib_dir, nvcc + " -c kernels.cu -arch=sm_90 -std=c++17 -I. -o kernels.o", /*limit_s=*/600);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  EXPECT_TRUE(std::filesystem::exists(lib_dir + "/kernels.o"));
}

TEST(ExportCudaTest, TargetWithoutRecordsExportsDefaultSchedulesThatCompile) {
  test::TempDir dir;
  test::WriteFileBytes(dir.Join("model.json"), kMixModel);
  const measure::Target h100 = H100Target();
  AddTarget(dir.Join("t.db"), h100);
  test::ProcessResult r = RunTune(dir.path(), {"export", "--db", "t.db", "--model", "model.json", "--target-key",
                                               h100.Key(), "--out", "lib"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  EXPECT_THAT(r.err, HasSubstr("(0 tuned, 4 default schedules)"));
  EXPECT_EQ(TreeOf(dir.Join("lib")),
            (std::vector<std::string>{"CMakeLists.txt", "kernels.cu", "manifest.json", "tune_kernels.h"}));

  const nlohmann::json manifest = ReadManifest(dir.Join("lib"));
  EXPECT_EQ(manifest["target"]["key"], h100.Key());
  EXPECT_EQ(manifest["target"]["cpu"], "sm_90");
  ASSERT_EQ(manifest["kernels"].size(), 4u);
  for (const nlohmann::json& k : manifest["kernels"]) {
    SCOPED_TRACE(k["function"].get<std::string>());
    EXPECT_EQ(k["schedule"], "default");
    EXPECT_TRUE(k["record_id"].is_null());
    auto w = codegen::Workload::FromKey(k["workload_key"].get<std::string>());
    ASSERT_TRUE(w.ok()) << w.status();
    auto tmpl = codegen::CreateTemplate(*w, codegen::Backend::kCuda, H100Limits());
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    auto def = (*tmpl)->ValidDefaultConfig();
    ASSERT_TRUE(def.ok()) << def.status();
    EXPECT_EQ(k["config"], nlohmann::json::parse((*tmpl)->space().ToJson(*def)));
    EXPECT_EQ(k["template"]["version"], (*tmpl)->version());
    ExpectLaunch(k["launch"], ExpectedKernel(**tmpl, *def, k["symbol"]));
  }
  const std::string header = test::ReadFileBytes(dir.Join("lib/tune_kernels.h"));
  EXPECT_THAT(header, HasSubstr("int tune_fc_1(const float* data, const float* weight, const float* bias, float* out, "
                                "cudaStream_t stream);"));
  EXPECT_THAT(test::ReadFileBytes(dir.Join("lib/CMakeLists.txt")), HasSubstr("CUDA_ARCHITECTURES 90 "));
  CompileCudaLibrary(dir.Join("lib"), manifest);
}

TEST(ExportCudaTest, RecordedSplitKScheduleKeepsItsScratchMemory) {
  test::TempDir dir;
  test::WriteFileBytes(dir.Join("model.json"), kCudaModel);
  const measure::Target h100 = H100Target();
  const int64_t target_id = AddTarget(dir.Join("t.db"), h100);

  // Two ok records of the long-K matmul on the H100: its default and a split-K config, the
  // split-K one faster. The export must take the split-K one, with its scratch buffers.
  auto w = codegen::Workload::Parse(codegen::OpKind::kMatmul, "16,32,512");
  ASSERT_TRUE(w.ok());
  auto tmpl = codegen::CreateTemplate(*w, codegen::Backend::kCuda, H100Limits());
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  const search::ConfigSpace& space = (*tmpl)->space();
  auto def = (*tmpl)->ValidDefaultConfig();
  ASSERT_TRUE(def.ok()) << def.status();
  std::optional<search::Config> split;
  for (int64_t k_split : {2, 4, 8}) {
    nlohmann::json j = nlohmann::json::parse(space.ToJson(*def));
    ASSERT_TRUE(j.contains("k_split")) << j;
    j["k_split"] = j["k_split"].is_array() ? nlohmann::json::array({k_split}) : nlohmann::json(k_split);
    auto c = space.FromJson(j.dump());
    if (c.ok() && space.WhyInvalid(*c).empty()) {
      split = *c;
      break;
    }
  }
  ASSERT_TRUE(split.has_value()) << "no valid split-K config near the default";
  const codegen::CudaKernel want = ExpectedKernel(**tmpl, *split, "tune_impl_4");
  ASSERT_FALSE(want.scratch.empty());

  std::mt19937_64 rng = test::TestRng(5);
  const double fast = std::uniform_real_distribution<double>(1e-6, 1e-5)(rng);
  int64_t split_record = 0;
  {
    auto db = dataset::RecordDatabase::Open(dir.Join("t.db"), /*create=*/false);
    ASSERT_TRUE(db.ok()) << db.status();
    auto task_id = (*db)->UpsertTask({0, w->Key(), "matmul", "{}", w->Flops(), (*tmpl)->version()});
    ASSERT_TRUE(task_id.ok()) << task_id.status();
    std::vector<dataset::Record> records;
    for (const auto& [config, seconds] : {std::pair{*def, fast * 3}, std::pair{*split, fast}}) {
      dataset::Record r;
      r.task_id = *task_id;
      r.target_id = target_id;
      r.config_json = space.ToJson(config);
      r.config_index = space.ToIndex(config);
      r.strategy = "random";
      r.protocol_json = measure::MeasureProtocol().ToJson();
      r.result.status = measure::MeasureStatus::kOk;
      r.result.costs_s = {seconds, seconds};
      r.result.number = 1;
      records.push_back(r);
    }
    ASSERT_TRUE((*db)->AddRecords(records).ok());
    split_record = records[1].id;
  }

  test::ProcessResult r = RunTune(dir.path(), {"export", "--db", "t.db", "--model", "model.json", "--target-key",
                                               std::to_string(target_id), "--out", "lib"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  EXPECT_THAT(r.err, HasSubstr("(1 tuned, 4 default schedules)"));
  const nlohmann::json manifest = ReadManifest(dir.Join("lib"));
  ASSERT_EQ(manifest["kernels"].size(), 5u);
  const nlohmann::json& k = manifest["kernels"][4];
  EXPECT_EQ(k["function"], "tune_long_k");
  EXPECT_EQ(k["schedule"], "record");
  EXPECT_EQ(k["record_id"], split_record);
  EXPECT_DOUBLE_EQ(k["time_s"].get<double>(), fast);
  EXPECT_EQ(k["config"], nlohmann::json::parse(space.ToJson(*split)));
  ExpectLaunch(k["launch"], want);
  EXPECT_THAT(test::ReadFileBytes(dir.Join("lib/tune_kernels.h")), HasSubstr("has scratch memory"));
  CompileCudaLibrary(dir.Join("lib"), manifest);
}

}  // namespace
}  // namespace tune::exporter_test
