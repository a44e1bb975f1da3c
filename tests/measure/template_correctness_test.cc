// Correctness of every template: random valid configs built, JIT-loaded and run in process,
// compared with the naive reference; and how invalid configs are rejected.
#include <cmath>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/ir/kernel.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "codegen/ir/template.h"
#include "codegen/templates.h"
#include "codegen/ir/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/host_builder.h"
#include "measure/reference.h"
#include "measure/runner.h"

namespace tune::measure {
namespace {

using codegen::OpKind;
using codegen::Template;
using codegen::Workload;
using ::testing::HasSubstr;

constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-4;
constexpr uint64_t kSeed = 20240611;
// Failures reported with the full kernel text, per workload; later ones get the config only.
constexpr int kMaxDetailedFailures = 3;

struct Case {
  std::string label;  // test name suffix
  OpKind op;
  std::string shape;  // Workload::Parse syntax
  bool bias;
  bool relu;
  int configs;  // distinct random valid configs drawn (DefaultConfig comes on top)
  bool relu6 = false;  // ONNX Clip(0, 6): inputs large enough that outputs above 6 occur
};

// Odd extents everywhere, so every split has few divisors and tiles of size 1 and of the
// whole extent both occur; GEMM 3 x 50 configs, conv2d 7 x 30.
void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"matmul_17x33x65_bias_relu", OpKind::kMatmul, "17,33,65", true, true, 50},
      {"dense_17x33x65", OpKind::kDense, "17,33,65", false, false, 50},
      {"batch_matmul_3x17x33x65_bias", OpKind::kBatchMatmul, "3,17,33,65", true, false, 50},
      // N,C,H,W,OC,KH,KW[,stride[,pad[,dilation[,groups]]]]
      {"conv_odd_3x17x19_oc5_k3_p1_bias_relu", OpKind::kConv2d, "1,3,17,19,5,3,3,1,1", true, true, 30},
      {"conv_stride2_pad1", OpKind::kConv2d, "1,4,16,15,8,3,3,2,1,1", false, false, 30},
      {"conv_dilation2_nopad_bias", OpKind::kConv2d, "1,4,13,14,6,3,3,1,0,2", true, false, 30},
      {"conv_dilation2_pad2_relu", OpKind::kConv2d, "1,2,9,11,4,3,3,1,2,2", false, true, 30},
      {"conv_groups2_relu", OpKind::kConv2d, "1,4,11,10,6,3,3,1,1,1,2", false, true, 30},
      {"conv_depthwise_bias_relu", OpKind::kConv2d, "1,8,12,11,8,3,3,1,1,1,8", true, true, 30},
      {"conv_1x1_batch2", OpKind::kConv2d, "2,16,9,7,12,1,1", false, false, 30},
      {"matmul_17x33x257_bias_relu6", OpKind::kMatmul, "17,33,257", true, false, 20, true},
      {"conv_c32_k3_relu6", OpKind::kConv2d, "1,32,9,10,8,3,3,1,1", false, false, 20, true},
  };
  return cases;
}

Workload MakeWorkload(const Case& c) {
  absl::StatusOr<Workload> w = Workload::Parse(c.op, c.shape);
  EXPECT_TRUE(w.ok()) << c.label << ": " << w.status();
  Workload out = w.ok() ? *w : Workload();
  out.bias = c.bias;
  out.relu = c.relu;
  out.relu6 = c.relu6;
  return out;
}

/// Up to `n` distinct valid configs drawn with ConfigSpace::Sample from a seeded rng.
std::vector<search::Config> SampleDistinct(const search::ConfigSpace& space, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<search::Config> out;
  std::set<uint64_t> seen;
  for (int draw = 0; draw < 50 * n && static_cast<int>(out.size()) < n; ++draw) {
    absl::StatusOr<search::Config> c = space.Sample(rng);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) break;
    EXPECT_TRUE(space.IsValid(*c));
    if (seen.insert(space.ToIndex(*c)).second) out.push_back(*c);
  }
  return out;
}

/// A 64-byte aligned copy of `values` (the kernel ABI wants aligned buffers).
struct AlignedCopy {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data;
  AlignedCopy(const float* values, int64_t n, float fill)
      : data(static_cast<float*>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64))) {
    for (int64_t i = 0; i < n; ++i) data.get()[i] = values != nullptr ? values[i] : fill;
  }
};

class TemplateCorrectnessTest : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { codegen::runtime::SetNumThreads(2); }
  static void TearDownTestSuite() { codegen::runtime::SetNumThreads(1); }
};

TEST_P(TemplateCorrectnessTest, RandomConfigsMatchReference) {
  const Case& c = GetParam();
  Workload workload = MakeWorkload(c);
  absl::StatusOr<std::unique_ptr<Template>> tmpl_or = CreateTemplate(workload);
  ASSERT_TRUE(tmpl_or.ok()) << tmpl_or.status();
  const Template& tmpl = **tmpl_or;
  const search::ConfigSpace& space = tmpl.space();
  ASSERT_EQ(codegen::runtime::NumThreads(), 2);

  std::vector<search::Config> configs = {tmpl.DefaultConfig()};
  ASSERT_TRUE(space.IsValid(configs[0])) << "default config: " << space.WhyInvalid(configs[0]);
  std::vector<search::Config> sampled = SampleDistinct(space, c.configs, kSeed);
  ASSERT_EQ(static_cast<int>(sampled.size()), c.configs)
      << "space too small for " << c.configs << " distinct configs";
  configs.insert(configs.end(), sampled.begin(), sampled.end());

  HostBuilder builder(codegen::CodegenOptions{}, /*threads=*/2);
  std::vector<BuildResult> builds = builder.BuildAll(tmpl, configs);
  ASSERT_EQ(builds.size(), configs.size());

  int failures = 0, parallel = 0, vectorized = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    const search::Config& config = configs[i];
    if (space.GetInt(config, "parallel")) ++parallel;
    const char* vec_knob = workload.op == OpKind::kConv2d ? "vector_axis" : "vectorize";
    if (space.GetInt(config, vec_knob)) ++vectorized;
    // Everything needed to debug a failure: which config, and the kernel it became.
    // The kernel text is left out after the first few failures to keep the log readable.
    auto context = [&] {
      std::string s = absl::StrCat(workload.Key(), " config #", i, " ", space.ToJson(config));
      if (failures <= kMaxDetailedFailures) {
        absl::StatusOr<codegen::LoweredFunc> f = tmpl.Lower(config, Builder::KernelName(tmpl, config));
        absl::StrAppend(&s, "\nkernel:\n", f.ok() ? codegen::Print(*f) : std::string(f.status().message()));
      }
      return s;
    };
    const BuildResult& build = builds[i];
    if (build.status != MeasureStatus::kOk) {
      ++failures;
      ADD_FAILURE() << "build failed (" << StatusName(build.status) << "): " << build.message << "\n"
                    << context();
      continue;
    }
    absl::StatusOr<std::unique_ptr<codegen::LoadedKernel>> loaded = codegen::LoadedKernel::Load(build.kernel);
    if (!loaded.ok()) {
      ++failures;
      ADD_FAILURE() << "load failed: " << loaded.status() << "\n" << context();
      continue;
    }

    // Fresh inputs for every config; the output starts as NaN so an element the kernel
    // never writes cannot pass.
    TaskData task = TaskData::Create(workload, kSeed + 1000 + i);
    std::vector<AlignedCopy> buffers;
    for (const auto& input : task.inputs) buffers.emplace_back(input.data(), input.size(), 0.0f);
    const int64_t out_n = static_cast<int64_t>(task.reference.size());
    buffers.emplace_back(nullptr, out_n, std::nanf(""));
    std::vector<float*> args;
    for (auto& b : buffers) args.push_back(b.data.get());
    (*loaded)->fn()(args.data());

    std::string why;
    if (!AllClose(args.back(), task.reference.data(), out_n, kRtol, kAtol, &why)) {
      ++failures;
      ADD_FAILURE() << "wrong result: " << why << "\n" << context();
    }
  }
  // The sample must exercise the interesting paths, or the test proves little.
  EXPECT_GT(parallel, 0) << "no parallel config drawn";
  EXPECT_GT(vectorized, 0) << "no vectorized config drawn";
  EXPECT_EQ(failures, 0) << failures << " of " << configs.size() << " configs of " << workload.Key()
                         << " failed";
}

INSTANTIATE_TEST_SUITE_P(Workloads, TemplateCorrectnessTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.label; });

// ---------------------------------------------------------------------------------------------
// Invalid configs
// ---------------------------------------------------------------------------------------------

/// The first config in index order that violates a constraint, or an empty config.
search::Config FirstInvalid(const search::ConfigSpace& space) {
  for (uint64_t i = 0; i < space.Size(); ++i) {
    search::Config c = space.FromIndex(i);
    if (!space.IsValid(c)) return c;
  }
  return {};
}

void ExpectRejected(const Template& tmpl, const search::Config& config) {
  const std::string why = tmpl.space().WhyInvalid(config);
  ASSERT_FALSE(why.empty());
  const std::string json = tmpl.space().ToJson(config);

  absl::StatusOr<codegen::Schedule> sched = tmpl.Instantiate(config);
  ASSERT_FALSE(sched.ok()) << json;
  EXPECT_EQ(sched.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sched.status().message(), HasSubstr("'" + why + "'")) << json;
  absl::StatusOr<codegen::LoweredFunc> func = tmpl.Lower(config, "invalid");
  EXPECT_FALSE(func.ok()) << json;

  BuildResult build = HostBuilder().Build(tmpl, config);
  EXPECT_EQ(build.status, MeasureStatus::kInvalidConfig) << json;
  EXPECT_THAT(build.message, HasSubstr(why)) << json;
  EXPECT_TRUE(build.kernel.object_code.empty());
}

struct InvalidCase {
  std::string label;
  OpKind op;
  std::string shape;
  std::set<std::string> constraints;  // every constraint random configs should break
};

void PrintTo(const InvalidCase& c, std::ostream* os) { *os << c.label; }

class InvalidConfigTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidConfigTest, BuilderAndInstantiateRejectWithConstraintName) {
  const InvalidCase& ic = GetParam();
  Workload workload = MakeWorkload(Case{ic.label, ic.op, ic.shape, false, false, 0});
  absl::StatusOr<std::unique_ptr<Template>> tmpl = CreateTemplate(workload);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  const search::ConfigSpace& space = (*tmpl)->space();

  search::Config first = FirstInvalid(space);
  ASSERT_FALSE(first.empty()) << "every config of " << workload.Key() << " is valid";
  ExpectRejected(**tmpl, first);

  // One violating config per constraint that random indices reach.
  std::mt19937_64 rng(kSeed);
  std::set<std::string> seen;
  for (int draw = 0; draw < 20000; ++draw) {
    search::Config c = space.FromIndex(search::UniformBelow(rng, space.Size()));
    std::string why = space.WhyInvalid(c);
    if (why.empty() || !seen.insert(why).second) continue;
    SCOPED_TRACE("constraint " + why);
    ExpectRejected(**tmpl, c);
  }
  std::set<std::string> expected = ic.constraints;
  if (codegen::HostCpuLimits().vector_registers < 32) {  // conv2d's fold_broadcast: AVX-512 hosts only
    expected.erase("fold_broadcast_pinned");
    expected.erase("fold_broadcast_vectors");
  }
  EXPECT_EQ(seen, expected);

  // An option index out of range is invalid too ("range").
  search::Config bad = (*tmpl)->DefaultConfig();
  bad[0] = static_cast<int32_t>(space.knobs()[0].options.size());
  EXPECT_EQ(space.WhyInvalid(bad), "range");
  absl::StatusOr<codegen::Schedule> sched = (*tmpl)->Instantiate(bad);
  ASSERT_FALSE(sched.ok());
  EXPECT_THAT(sched.status().message(), HasSubstr("'range'"));
}

// Shapes large enough that every constraint can be the first one broken: the register tile
// needs inner tiles whose product passes 256, the unroll bound (conv2d) a wide kernel; the
// blocked conv2d layout pins the vector axis and weight packing, the nchw one the blocked input
// (whose input-channel block must be more than one channel).
INSTANTIATE_TEST_SUITE_P(
    Templates, InvalidConfigTest,
    ::testing::Values(InvalidCase{"gemm", OpKind::kMatmul, "64,64,64",
                                  {"order_needs_tile", "register_tile", "unroll_size", "vector_width"}},
                      InvalidCase{"conv2d", OpKind::kConv2d, "1,64,20,40,64,3,11,1,1",
                                  {"fold_broadcast_pinned", "fold_broadcast_vectors", "in_block_needs_block",
                                   "in_block_pinned", "order_3_in_output", "pack_weight_pinned",
                                   "prepack_needs_pack", "register_tile", "unroll_size", "vector_axis_pinned",
                                   "vector_width"}}),
    [](const ::testing::TestParamInfo<InvalidCase>& info) { return info.param.label; });

// builder.h: "An invalid config becomes kInvalidConfig", also one whose option index is out of
// range (a stale config from an older space). The check runs in a child process so that a
// regression (an abort) cannot take the suite down.
TEST(InvalidConfigDeathTest, BuilderRejectsOutOfRangeConfigWithoutCrashing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Workload workload = MakeWorkload(Case{"gemm", OpKind::kMatmul, "17,33,65", false, false, 0});
  absl::StatusOr<std::unique_ptr<Template>> tmpl = CreateTemplate(workload);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  search::Config bad = (*tmpl)->DefaultConfig();
  bad[0] = static_cast<int32_t>((*tmpl)->space().knobs()[0].options.size());
  EXPECT_EXIT(
      {
        BuildResult build = HostBuilder().Build(**tmpl, bad);
        bool ok = build.status == MeasureStatus::kInvalidConfig &&
                  build.message.find("range") != std::string::npos;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}


}  // namespace
}  // namespace tune::measure
