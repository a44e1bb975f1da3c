// `tune export` on a CPU target: the library builds with CMake, links into a program without
// tune, computes what the reference computes, names the recorded configs and the recorded CPU.
#include <cmath>
#include <cstdio>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cpu/cpu_limits.h"
#include "codegen/ir/workload.h"
#include "codegen/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/local_runner.h"
#include "measure/measure_result.h"
#include "measure/reference.h"
#include "tests/common/test_seed.h"
#include "tests/exporter/export_test_helpers.h"

namespace tune::exporter_test {
namespace {

using ::testing::HasSubstr;

/// A C++ program that runs every kernel of `manifest` through its own function and through
/// the generic entry, on the inputs in_<kernel>_<tensor>.bin, and writes out_<kernel>.bin and
/// gen_<kernel>.bin; kernel 0 once more on one thread (one_0.bin). Then it writes new values
/// (0.5 - x) into each kernel's second input at the same address and runs it again (stale_<kernel>.bin:
/// a kernel that packs its weight once still computes with the old one), and once more after
/// tune_kernels_forget_packed_weights (fresh_<kernel>.bin). Exits non-zero when a call fails, a
/// size disagrees with the library's shapes, or a null pointer is not refused.
std::string CpuCheckProgram(const nlohmann::json& manifest) {
  std::ostringstream os;
  os << R"(#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tune_kernels.h"

static std::vector<float> Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::vector<float> v(static_cast<size_t>(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

static void Write(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
}

static size_t Elements(int index, int tensor) {
  int64_t dims[5];
  const int rank = tune_kernels_shape(index, tensor, dims);
  if (rank < 0) return 0;
  size_t n = 1;
  for (int d = 0; d < rank; ++d) n *= static_cast<size_t>(dims[d]);
  return n;
}

int main() {
)";
  const nlohmann::json& kernels = manifest["kernels"];
  os << "  if (tune_kernels_count() != " << kernels.size() << ") return 10;\n";
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string fn = kernels[i]["function"];
    const size_t n = kernels[i]["inputs"].size();
    std::string args, null_args;
    for (size_t t = 0; t < n; ++t) {
      args += "in[" + std::to_string(t) + "].data(), ";
      null_args += t == 1 ? "nullptr, " : "in[" + std::to_string(t) + "].data(), ";
    }
    os << "  {\n"
       << "    const int i = " << i << ", n = " << n << ";\n"
       << "    if (std::strcmp(tune_kernels_name(i), \"" << fn << "\") != 0 || tune_kernels_num_inputs(i) != n) return 11;\n"
       << "    std::vector<std::vector<float>> in;\n"
       << "    for (int t = 0; t < n; ++t) {\n"
       << "      in.push_back(Read(\"in_\" + std::to_string(i) + \"_\" + std::to_string(t) + \".bin\"));\n"
       << "      if (in.back().size() != Elements(i, t)) return 12;\n"
       << "    }\n"
       << "    std::vector<float> out(Elements(i, n), NAN), gen(Elements(i, n), NAN);\n"
       << "    if (" << fn << "(" << args << "out.data()) != 0) return 13;\n"
       << "    Write(\"out_\" + std::to_string(i) + \".bin\", out);\n"
       << "    std::vector<const float*> ptrs;\n"
       << "    for (const auto& v : in) ptrs.push_back(v.data());\n"
       << "    if (tune_kernels_run(i, ptrs.data(), gen.data()) != 0) return 14;\n"
       << "    Write(\"gen_\" + std::to_string(i) + \".bin\", gen);\n"
       << "    if (" << fn << "(" << null_args << "out.data()) != -1) return 15;\n"
       << "    if (i == 0) {\n"
       << "      tune_kernels_set_threads(1);\n"
       << "      std::vector<float> one(out.size(), NAN);\n"
       << "      if (tune_kernels_threads() != 1 || " << fn << "(" << args << "one.data()) != 0) return 16;\n"
       << "      Write(\"one_0.bin\", one);\n"
       << "      tune_kernels_set_threads(" << manifest["target"]["threads"].get<int>() << ");\n"
       << "    }\n"
       << "    for (float& x : in[1]) x = 0.5f - x;\n"
       << "    if (" << fn << "(" << args << "out.data()) != 0) return 18;\n"
       << "    Write(\"stale_\" + std::to_string(i) + \".bin\", out);\n"
       << "    tune_kernels_forget_packed_weights();\n"
       << "    if (" << fn << "(" << args << "out.data()) != 0) return 19;\n"
       << "    Write(\"fresh_\" + std::to_string(i) + \".bin\", out);\n"
       << "  }\n";
  }
  os << "  return tune_kernels_run(" << kernels.size() << ", nullptr, nullptr) == -1 ? 0 : 17;\n}\n";
  return os.str();
}

std::vector<float> ReadFloats(const std::string& path) {
  const std::string bytes = test::ReadFileBytes(path);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

void WriteFloats(const std::string& path, const std::vector<float>& v) {
  test::WriteFileBytes(path, std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

/// Builds the exported library `lib` (in `dir`) with CMake, links CpuCheckProgram against it
/// (or, with `as_subdirectory`, builds both in one project that add_subdirectory()s the
/// library), runs it on seeded random inputs, and checks every output against the naive reference.
void BuildRunAndCheckCpuLibrary(const test::TempDir& dir, const std::string& lib, bool as_subdirectory) {
  const nlohmann::json manifest = ReadManifest(dir.Join(lib));
  ASSERT_TRUE(manifest.contains("kernels"));
  test::WriteFileBytes(dir.Join("check.cc"), CpuCheckProgram(manifest));
  if (as_subdirectory) {
    test::WriteFileBytes(dir.Join("CMakeLists.txt"),
                         "cmake_minimum_required(VERSION 3.16)\nproject(check_export LANGUAGES CXX)\n"
                         "add_subdirectory(" + lib + ")\nadd_executable(check check.cc)\n"
                         "target_link_libraries(check PRIVATE tune_kernels)\n");
    test::ProcessResult b = RunShell(dir.path(),
                                     "cmake -S . -B consumer-build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=c++ "
                                     "&& cmake --build consumer-build -j 2 && cp consumer-build/check check");
    ASSERT_TRUE(b.exited && b.exit_code == 0) << b;
  } else {
    test::ProcessResult b = RunShell(dir.path(), "cmake -S " + lib + " -B " + lib +
                                                     "-build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=c++ "
                                                     "&& cmake --build " + lib + "-build -j 2");
    ASSERT_TRUE(b.exited && b.exit_code == 0) << b;
    ASSERT_TRUE(std::filesystem::exists(dir.Join(lib + "-build/libtune_kernels.a")));
    test::ProcessResult c = RunShell(dir.path(), "c++ -std=c++17 -O1 check.cc -I " + lib + " " + lib +
                                                     "-build/libtune_kernels.a -lpthread -o check");
    ASSERT_TRUE(c.exited && c.exit_code == 0) << c;
  }

  std::mt19937_64 rng = test::TestRng(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const nlohmann::json& kernels = manifest["kernels"];
  std::vector<std::vector<std::vector<float>>> inputs(kernels.size());
  std::vector<codegen::Workload> workloads;
  for (size_t i = 0; i < kernels.size(); ++i) {
    auto w = codegen::Workload::FromKey(kernels[i]["workload_key"].get<std::string>());
    ASSERT_TRUE(w.ok()) << w.status();
    workloads.push_back(*w);
    const std::vector<codegen::TensorSpec> specs = w->Inputs();
    for (size_t t = 0; t < specs.size(); ++t) {
      std::vector<float> data(static_cast<size_t>(specs[t].NumElements()));
      for (float& x : data) x = value(rng);
      WriteFloats(dir.Join("in_" + std::to_string(i) + "_" + std::to_string(t) + ".bin"), data);
      inputs[i].push_back(std::move(data));
    }
  }
  test::ProcessResult run = test::RunProcess({dir.Join("check")}, dir.path());
  ASSERT_TRUE(run.exited && run.exit_code == 0) << run;
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::vector<float> want;
    measure::ComputeReference(workloads[i], inputs[i], &want);
    std::vector<std::string> outputs = {"out_", "gen_"};
    if (i == 0) outputs.push_back("one_");
    for (const std::string& prefix : outputs) {
      const std::vector<float> got = ReadFloats(dir.Join(prefix + std::to_string(i) + ".bin"));
      ASSERT_EQ(got.size(), want.size()) << prefix << i;
      std::string why;
      EXPECT_TRUE(measure::AllClose(got.data(), want.data(), static_cast<int64_t>(want.size()), 1e-3, 1e-4, &why))
          << kernels[i]["function"] << " (" << prefix << "): " << why;
    }
    // New weight values at the same address: a kernel that packs its weight once computes
    // with the old ones until the packs are forgotten; the others with the new ones at once.
    const nlohmann::json& config = kernels[i]["config"];
    const bool packed_once = config.is_object() && config.contains("prepack") && config["prepack"] == nlohmann::json::array({1});
    std::vector<std::vector<float>> changed = inputs[i];
    for (float& x : changed[1]) x = 0.5f - x;
    std::vector<float> want_changed;
    measure::ComputeReference(workloads[i], changed, &want_changed);
    for (const auto& [prefix, expected] : {std::pair{"stale_", packed_once ? &want : &want_changed},
                                           std::pair{"fresh_", &want_changed}}) {
      const std::vector<float> got = ReadFloats(dir.Join(prefix + std::to_string(i) + ".bin"));
      ASSERT_EQ(got.size(), expected->size()) << prefix << i;
      std::string why;
      EXPECT_TRUE(
          measure::AllClose(got.data(), expected->data(), static_cast<int64_t>(expected->size()), 1e-3, 1e-4, &why))
          << kernels[i]["function"] << " (" << prefix << ", packed once: " << packed_once << "): " << why;
    }
  }
}

/// The mnemonics of every instruction in the objects of an exported CPU library.
std::vector<std::string> Mnemonics(const std::string& lib_dir) {
  std::string tool;
  for (const char* t : {"/usr/bin/llvm-objdump-15", "/usr/bin/llvm-objdump", "/usr/bin/objdump"}) {
    if (std::filesystem::exists(t)) {
      tool = t;
      break;
    }
  }
  EXPECT_FALSE(tool.empty()) << "no objdump to disassemble with";
  test::ProcessResult r = RunShell(lib_dir, tool + " -d --no-show-raw-insn objects/*.o");
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r;
  std::vector<std::string> out;
  const std::regex insn(R"(^\s*[0-9a-f]+:\s+([a-z][a-z0-9.]*))");
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, insn)) out.push_back(m[1]);
  }
  return out;
}

int CountVex(const std::vector<std::string>& mnemonics) {
  int n = 0;
  for (const std::string& m : mnemonics) n += !m.empty() && m[0] == 'v';
  return n;
}

TEST(ExportCpuTest, TunedModelExportsALibraryThatBuildsAndMatchesTheReference) {
  test::TempDir dir;
  test::WriteFileBytes(dir.Join("model.json"), kMixModel);
  test::ProcessResult tuned = RunTune(dir.path(), {"model.json", "--target", "llvm", "--trials", "3", "--threads", "2",
                                                   "--db", "t.db", "--repeats", "1", "--min-repeat-ms", "1"});
  ASSERT_TRUE(tuned.exited && tuned.exit_code == 0) << tuned;
  test::ProcessResult exported = RunTune(dir.path(), {"export", "--db", "t.db", "--model", "model.json", "--target",
                                                      "llvm", "--threads", "2", "--out", "lib"});
  ASSERT_TRUE(exported.exited && exported.exit_code == 0) << exported;
  EXPECT_THAT(exported.err, HasSubstr("exported 4 kernels (4 tuned"));

  const nlohmann::json manifest = ReadManifest(dir.Join("lib"));
  const std::string key = measure::Target::HostCpu(2).Key();
  EXPECT_EQ(manifest["target"]["key"], key);
  EXPECT_EQ(manifest["model"], "export-mix");
  EXPECT_TRUE(manifest["tune"]["commit"].is_string());
  const nlohmann::json& kernels = manifest["kernels"];
  ASSERT_EQ(kernels.size(), 4u);
  const std::vector<std::string> functions = {"tune_fc_1", "tune_proj", "tune_conv", "tune_conv_2"};
  const std::vector<std::string> ops = {"dense", "matmul", "conv2d", "conv2d"};
  for (size_t i = 0; i < kernels.size(); ++i) {
    const nlohmann::json& k = kernels[i];
    SCOPED_TRACE(k.dump());
    EXPECT_EQ(k["function"], functions[i]);
    EXPECT_EQ(k["op"], ops[i]);
    EXPECT_EQ(k["target_key"], key);
    EXPECT_EQ(k["schedule"], "record");
    EXPECT_GT(k["record_id"].get<int64_t>(), 0);
    EXPECT_GT(k["time_s"].get<double>(), 0);
    EXPECT_TRUE(k["strategy"].is_string());
    EXPECT_GT(k["template"]["version"].get<int>(), 0);
    EXPECT_TRUE(std::filesystem::exists(dir.Join("lib/" + k["object"].get<std::string>())));
    // The config is the one `tune db best` names for the task on this target.
    test::ProcessResult best = RunTune(dir.path(), {"db", "best", "--db", "t.db", "--target", key, "--task",
                                                    k["workload_key"].get<std::string>()});
    ASSERT_TRUE(best.exited && best.exit_code == 0) << best;
    const size_t open = best.out.rfind("\n", best.out.find('{'));
    const std::string row = best.out.substr(open == std::string::npos ? 0 : open + 1);
    const nlohmann::json config =
        nlohmann::json::parse(row.substr(row.find('{'), row.rfind('}') - row.find('{') + 1), nullptr, false);
    EXPECT_EQ(k["config"], config) << best.out;
  }
  EXPECT_EQ(kernels[2]["count"], 2);
  EXPECT_TRUE(kernels[2]["relu"].get<bool>());
  EXPECT_TRUE(kernels[3]["relu6"].get<bool>());
  const std::string header = test::ReadFileBytes(dir.Join("lib/tune_kernels.h"));
  EXPECT_THAT(header, HasSubstr("int tune_conv(const float* data, const float* weight, const float* bias, float* out);"));
  EXPECT_THAT(header, HasSubstr("int tune_proj(const float* a, const float* b, float* out);"));
  EXPECT_THAT(header, HasSubstr("[1, 8, 12, 12]"));  // tune_conv's output

  BuildRunAndCheckCpuLibrary(dir, "lib", /*as_subdirectory=*/false);
}

// A model tuned with --layout nchwc exports its NCHWc kernels with --layout nchwc: the
// convolutions' workloads (a dense one and a depthwise one) are the blocked ones, tuned, and the
// library's kernels match the reference on blocked tensors; the plain export of the same
// database finds no records for the NCHW convolutions. --layout nchwc on a CUDA target is refused.
TEST(ExportCpuTest, NchwcLayoutExportsTheBlockedKernelsItTuned) {
  test::TempDir dir;
  test::WriteFileBytes(dir.Join("model.json"), R"({"name": "export-nchwc", "layers": [
    {"name": "conv", "op": "conv2d", "shape": "1,16,10,10,32,3,3,1,1", "bias": true, "relu": true},
    {"name": "dw", "op": "conv2d", "shape": "1,32,8,8,32,3,3,1,1,1,32", "relu6": true},
    {"name": "fc", "op": "dense", "shape": "1,10,32"}]})");
  test::ProcessResult tuned =
      RunTune(dir.path(), {"model.json", "--target", "llvm", "--layout", "nchwc", "--trials", "3", "--threads", "2",
                           "--db", "t.db", "--repeats", "1", "--min-repeat-ms", "1"});
  ASSERT_TRUE(tuned.exited && tuned.exit_code == 0) << tuned;
  test::ProcessResult exported = RunTune(dir.path(), {"export", "--db", "t.db", "--model", "model.json", "--target",
                                                      "llvm", "--threads", "2", "--layout", "nchwc", "--out", "lib"});
  ASSERT_TRUE(exported.exited && exported.exit_code == 0) << exported;
  EXPECT_THAT(exported.err, HasSubstr("exported 3 kernels (3 tuned"));
  const nlohmann::json manifest = ReadManifest(dir.Join("lib"));
  ASSERT_EQ(manifest["kernels"].size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_THAT(manifest["kernels"][i]["workload_key"].get<std::string>(), ::testing::ContainsRegex("_nchw(8|16)c/"));
  }
  BuildRunAndCheckCpuLibrary(dir, "lib", /*as_subdirectory=*/false);

  test::ProcessResult plain = RunTune(dir.path(), {"export", "--db", "t.db", "--model", "model.json", "--target",
                                                   "llvm", "--threads", "2", "--out", "plain"});
  ASSERT_TRUE(plain.exited && plain.exit_code == 0) << plain;
  EXPECT_THAT(plain.err, HasSubstr("exported 3 kernels (1 tuned"));

  const measure::Target gpu = H100Target();
  AddTarget(dir.Join("t.db"), gpu);
  test::ProcessResult cuda = RunTune(dir.path(), {"export", "--db", "t.db", "--model", "model.json", "--target-key",
                                                  gpu.Key(), "--layout", "nchwc", "--out", "gpu"});
  ASSERT_TRUE(cuda.exited) << cuda;
  EXPECT_NE(cuda.exit_code, 0) << cuda;
  EXPECT_THAT(cuda.err, HasSubstr("--layout nchwc is for CPU targets"));
  EXPECT_FALSE(std::filesystem::exists(dir.Join("gpu")));
}

// Recorded schedules that pack their weight once (prepack) for the dense and both convolutions
// (nchw with pack_weight, blocked depthwise): the library's kernels pack each weight on their
// first call, reuse it while its values change at the same address, and pack it again after
// tune_kernels_forget_packed_weights (BuildRunAndCheckCpuLibrary checks all three).
TEST(ExportCpuTest, PrepackSchedulesPackEachWeightOnceUntilForgotten) {
  test::TempDir dir;
  test::WriteFileBytes(dir.Join("model.json"), kMixModel);
  const measure::Target host = measure::Target::HostCpu(2);
  const int64_t target_id = AddTarget(dir.Join("t.db"), host);
  struct Layer {
    codegen::OpKind op;
    const char* shape;
    bool bias, relu, relu6;
    nlohmann::json changes;
  };
  const std::vector<Layer> layers = {
      {codegen::OpKind::kDense, "4,24,40", true, false, false, {{"pack_b", {1}}, {"prepack", {1}}}},
      {codegen::OpKind::kConv2d, "1,3,12,12,8,3,3,1,1", true, true, false, {{"pack_weight", {1}}, {"prepack", {1}}}},
      {codegen::OpKind::kConv2d, "1,8,10,10,8,3,3,1,1,1,8", false, false, true, {{"layout", {1}}, {"tile_oc", {1, 1, 8}}, {"prepack", {1}}}},
  };
  std::mt19937_64 rng = test::TestRng(11);
  {
    auto db = dataset::RecordDatabase::Open(dir.Join("t.db"), /*create=*/false);
    ASSERT_TRUE(db.ok()) << db.status();
    for (const Layer& layer : layers) {
      auto w = codegen::Workload::Parse(layer.op, layer.shape);
      ASSERT_TRUE(w.ok()) << w.status();
      w->bias = layer.bias;
      w->relu = layer.relu;
      w->relu6 = layer.relu6;
      auto tmpl = codegen::CreateTemplate(*w);
      ASSERT_TRUE(tmpl.ok()) << tmpl.status();
      const search::ConfigSpace& space = (*tmpl)->space();
      nlohmann::json j = nlohmann::json::parse(space.ToJson((*tmpl)->DefaultConfig()));
      for (auto it = layer.changes.begin(); it != layer.changes.end(); ++it) j[it.key()] = it.value();
      auto config = space.FromJson(j.dump());
      ASSERT_TRUE(config.ok()) << config.status();
      *config = space.Canonical(*config);  // knobs the change made moot at option 0
      ASSERT_EQ(space.WhyInvalid(*config), "") << j.dump();
      auto task_id = (*db)->UpsertTask({0, w->Key(), codegen::OpName(w->op), "{}", w->Flops(), (*tmpl)->version()});
      ASSERT_TRUE(task_id.ok()) << task_id.status();
      dataset::Record r;
      r.task_id = *task_id;
      r.target_id = target_id;
      r.config_json = space.ToJson(*config);
      r.config_index = space.ToIndex(*config);
      r.strategy = "random";
      r.protocol_json = measure::MeasureProtocol().ToJson();
      r.result.status = measure::MeasureStatus::kOk;
      const double seconds = std::uniform_real_distribution<double>(1e-6, 1e-5)(rng);
      r.result.costs_s = {seconds, seconds};
      r.result.number = 1;
      r.result.message = measure::LocalRunner::kPackedOnceNote;
      std::vector<dataset::Record> records = {r};
      ASSERT_TRUE((*db)->AddRecords(records).ok());
    }
  }
  test::ProcessResult exported = RunTune(dir.path(), {"export", "--db", "t.db", "--model", "model.json", "--target-key",
                                                      std::to_string(target_id), "--out", "lib"});
  ASSERT_TRUE(exported.exited && exported.exit_code == 0) << exported;
  EXPECT_THAT(exported.err, HasSubstr("(3 tuned, 1 default schedules)"));
  const nlohmann::json manifest = ReadManifest(dir.Join("lib"));
  ASSERT_EQ(manifest["kernels"].size(), 4u);
  for (int i : {0, 2, 3}) {
    EXPECT_EQ(manifest["kernels"][i]["schedule"], "record") << i;
    EXPECT_EQ(manifest["kernels"][i]["config"]["prepack"], nlohmann::json::array({1})) << i;
  }
  EXPECT_THAT(test::ReadFileBytes(dir.Join("lib/tune_kernels.h")), HasSubstr("void tune_kernels_forget_packed_weights(void);"));
  BuildRunAndCheckCpuLibrary(dir, "lib", /*as_subdirectory=*/false);
}

// A recorded target's configs are configs of its CPU's space (its vector registers, its
// threads): the export reads them in that space, where this host's space may not hold them,
// and compiles them for that CPU.
TEST(ExportCpuTest, RecordsOfAnotherCpuAreReadInThatCpusSpace) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "the CPU names of this test are x86-64 ones";
#endif
  test::TempDir dir;
  test::WriteFileBytes(dir.Join("model.json"), kMixModel);
  // The other CPU: SSE only where this host has AVX, AVX-512 where it has less.
  const codegen::CpuLimits host = codegen::HostCpuLimits();
  const measure::Target other =
      host.isa == "sse" ? CpuTarget("skylake-avx512", "+avx,+avx2,+avx512bw,+avx512f,+avx512vl,+f16c,+fma,+sse4.2", 2)
                        : CpuTarget("nehalem", "+sse4.2", 2);
  const int64_t target_id = AddTarget(dir.Join("t.db"), other);
  auto w = codegen::Workload::Parse(codegen::OpKind::kMatmul, "8,20,12");
  ASSERT_TRUE(w.ok()) << w.status();
  codegen::CpuLimits limits = codegen::CpuLimitsOf(other.features);
  limits.threads = other.threads;
  auto theirs = codegen::CreateTemplate(*w, codegen::Backend::kLlvm, {}, limits);
  auto ours = codegen::CreateTemplate(*w);
  ASSERT_TRUE(theirs.ok() && ours.ok());
  // A config of the other CPU's space that this host's space refuses.
  std::mt19937_64 rng = test::TestRng(5);
  std::string config_json;
  for (int i = 0; i < 2000 && config_json.empty(); ++i) {
    auto c = (*theirs)->space().Sample(rng);
    ASSERT_TRUE(c.ok()) << c.status();
    const std::string j = (*theirs)->space().ToJson(*c);
    if (!(*ours)->space().FromJson(j).ok()) config_json = j;
  }
  ASSERT_FALSE(config_json.empty()) << "no config of " << other.Key() << " that this host's space refuses";
  {
    auto db = dataset::RecordDatabase::Open(dir.Join("t.db"), /*create=*/false);
    ASSERT_TRUE(db.ok()) << db.status();
    auto task_id = (*db)->UpsertTask({0, w->Key(), codegen::OpName(w->op), "{}", w->Flops(), (*theirs)->version()});
    ASSERT_TRUE(task_id.ok()) << task_id.status();
    dataset::Record r;
    r.task_id = *task_id;
    r.target_id = target_id;
    r.config_json = config_json;
    r.strategy = "random";
    r.protocol_json = measure::MeasureProtocol().ToJson();
    r.result.status = measure::MeasureStatus::kOk;
    r.result.costs_s = {2e-6};
    r.result.number = 1;
    std::vector<dataset::Record> records = {r};
    ASSERT_TRUE((*db)->AddRecords(records).ok());
  }
  test::ProcessResult exported = RunTune(dir.path(), {"export", "--db", "t.db", "--model", "model.json", "--target-key",
                                                      std::to_string(target_id), "--out", "lib"});
  ASSERT_TRUE(exported.exited && exported.exit_code == 0) << exported;
  EXPECT_THAT(exported.err, HasSubstr("(1 tuned, 3 default schedules)"));
  const nlohmann::json manifest = ReadManifest(dir.Join("lib"));
  ASSERT_EQ(manifest["kernels"].size(), 4u);
  EXPECT_EQ(manifest["kernels"][1]["schedule"], "record");
  EXPECT_EQ(manifest["kernels"][1]["config"], nlohmann::json::parse(config_json));
}

TEST(ExportCpuTest, ObjectsAreCompiledForTheCpuOfTheTargetKey) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "the CPU names of this test are x86-64 ones";
#endif
  test::TempDir dir;
  test::WriteFileBytes(dir.Join("model.json"), kMixModel);
  std::mt19937_64 rng = test::TestRng(3);
  const int threads = std::uniform_int_distribution<int>(1, 3)(rng);
  const measure::Target generic = CpuTarget("x86-64", "", threads);
  const measure::Target haswell = CpuTarget("haswell", "+avx,+avx2,+f16c,+fma,+sse4.2", threads);
  AddTarget(dir.Join("t.db"), generic);
  const int64_t haswell_id = AddTarget(dir.Join("t.db"), haswell);

  test::ProcessResult a = RunTune(dir.path(), {"export", "--db", "t.db", "--model", "model.json", "--target-key",
                                               generic.Key(), "--out", "generic"});
  ASSERT_TRUE(a.exited && a.exit_code == 0) << a;
  test::ProcessResult b = RunTune(dir.path(), {"export", "--db", "t.db", "--model", "model.json", "--target-key",
                                               std::to_string(haswell_id), "--out", "haswell"});
  ASSERT_TRUE(b.exited && b.exit_code == 0) << b;
  EXPECT_THAT(a.err, HasSubstr("(0 tuned, 4 default schedules)"));

  for (const auto& [lib, target] : {std::pair{"generic", generic}, std::pair{"haswell", haswell}}) {
    const nlohmann::json manifest = ReadManifest(dir.Join(lib));
    EXPECT_EQ(manifest["target"]["key"], target.Key());
    EXPECT_EQ(manifest["target"]["threads"], threads);
    for (const nlohmann::json& k : manifest["kernels"]) {
      EXPECT_EQ(k["schedule"], "default");
      EXPECT_TRUE(k["record_id"].is_null());
      EXPECT_TRUE(k["time_s"].is_null());
    }
  }
  // x86-64 has no AVX: no VEX-encoded instruction. Haswell's AVX encodes every float
  // instruction with VEX (vmovss, vfmadd..., vmulps).
  const std::vector<std::string> generic_code = Mnemonics(dir.Join("generic"));
  const std::vector<std::string> haswell_code = Mnemonics(dir.Join("haswell"));
  ASSERT_GT(generic_code.size(), 20u);
  ASSERT_GT(haswell_code.size(), 20u);
  EXPECT_EQ(CountVex(generic_code), 0);
  EXPECT_GT(CountVex(haswell_code), static_cast<int>(haswell_code.size() / 10));
  EXPECT_THAT(test::ReadFileBytes(dir.Join("generic/tune_runtime.cc")),
              HasSubstr("\n#define TUNE_RT_DEFAULT_THREADS " + std::to_string(threads) + "\n"));

  // The baseline x86-64 code runs anywhere: built inside a project of its own, it computes
  // what the reference computes.
  BuildRunAndCheckCpuLibrary(dir, "generic", /*as_subdirectory=*/true);
}

}  // namespace
}  // namespace tune::exporter_test
