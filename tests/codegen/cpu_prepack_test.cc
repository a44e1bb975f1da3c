// Weights packed once (knob prepack): dense and conv2d kernels fill a buffer kept across calls on
// their first call and reuse it later, per kernel, until tune_rt_prepacked_reset.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cpu/llvm_codegen.h"
#include "codegen/ir/ir_printer.h"
#include "codegen/ir/kernel.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "codegen/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/space.h"
#include "tests/common/cpu_kernel_check.h"

namespace tune::codegen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kPrepackSeed = 20261127;

std::unique_ptr<Template> PrepackTemplate(OpKind op, const std::string& shape, bool bias, bool relu) {
  absl::StatusOr<Workload> w = Workload::Parse(op, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  Workload wl = w.ok() ? *w : Workload{};
  wl.bias = bias;
  wl.relu = relu;
  absl::StatusOr<std::unique_ptr<Template>> t = CreateTemplate(wl);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

/// A compiled and loaded kernel of one config.
struct PrepackKernel {
  std::unique_ptr<LoadedKernel> loaded;
  std::string text;
  KernelFn fn() const { return loaded->fn(); }
};

PrepackKernel LoadPrepackKernel(const Template& tmpl, const search::Config& config, const std::string& name) {
  PrepackKernel k;
  absl::StatusOr<LoweredFunc> f = tmpl.Lower(config, name);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return k;
  k.text = Print(*f);
  absl::StatusOr<CompiledKernel> compiled = CompileForHost(*f);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return k;
  absl::StatusOr<std::unique_ptr<LoadedKernel>> loaded = LoadedKernel::Load(*compiled);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (loaded.ok()) k.loaded = std::move(*loaded);
  return k;
}

/// A workload's arguments in fenced arrays that stay at their addresses across calls.
class PrepackArgs {
 public:
  PrepackArgs(const Workload& w, std::mt19937_64& rng) : w_(w) {
    for (const TensorSpec& spec : w.Inputs()) {
      values_.push_back(test::RandomValues(spec.NumElements(), rng));
      arrays_.push_back(std::make_unique<test::FencedArray>(spec.NumElements()));
      std::memcpy(arrays_.back()->data(), values_.back().data(), values_.back().size() * 4);
      args_.push_back(arrays_.back()->data());
    }
    arrays_.push_back(std::make_unique<test::FencedArray>(w.Output().NumElements()));
    args_.push_back(arrays_.back()->data());
  }
  /// Writes new random values into the weight (input 1), at the same address.
  void NewWeight(std::mt19937_64& rng) {
    values_[1] = test::RandomValues(static_cast<int64_t>(values_[1].size()), rng);
    std::memcpy(arrays_[1]->data(), values_[1].data(), values_[1].size() * 4);
  }
  const std::vector<std::vector<float>>& values() const { return values_; }
  float* weight() const { return arrays_[1]->data(); }

  /// Calls `fn` (output starting as NaN) and compares with the reference of `expected_inputs`;
  /// empty when it matches, the fences are intact and the inputs unchanged.
  std::string CallAndCheck(KernelFn fn, const std::vector<std::vector<float>>& expected_inputs) {
    float* out = args_.back();
    const int64_t out_n = w_.Output().NumElements();
    for (int64_t j = 0; j < out_n; ++j) out[j] = std::nanf("");
    fn(args_.data());
    const std::vector<float> want = test::ReferenceOutput(w_, expected_inputs);
    for (int64_t j = 0; j < out_n; ++j) {
      if (!(std::fabs(out[j] - want[j]) <= 1e-4 + 1e-3 * std::fabs(want[j]))) {
        return absl::StrCat("wrong result at ", j, ": ", out[j], " vs ", want[j]);
      }
    }
    for (const auto& a : arrays_) {
      if (!a->Intact()) return "wrote past a buffer";
    }
    for (size_t a = 0; a < values_.size(); ++a) {
      if (std::memcmp(arrays_[a]->data(), values_[a].data(), values_[a].size() * 4) != 0) return "wrote into an input";
    }
    return "";
  }

 private:
  Workload w_;
  std::vector<std::vector<float>> values_;
  std::vector<std::unique_ptr<test::FencedArray>> arrays_;
  std::vector<float*> args_;
};

/// For each config: the first call packs and matches the reference; with new weight values at
/// the same address a second call still matches the ORIGINAL weight's reference and packs
/// nothing (the pack was reused); after tune_rt_prepacked_reset a call packs again and matches
/// the new weight.
void CheckPackedOnce(const Template& tmpl, const std::vector<search::Config>& configs, std::mt19937_64& rng,
                     const std::string& prefix) {
  const search::ConfigSpace& space = tmpl.space();
  for (size_t i = 0; i < configs.size(); ++i) {
    SCOPED_TRACE(absl::StrCat(tmpl.workload().Key(), " ", space.ToJson(configs[i])));
    PrepackKernel k = LoadPrepackKernel(tmpl, configs[i], absl::StrCat(prefix, i));
    ASSERT_NE(k.loaded, nullptr);
    EXPECT_THAT(k.text, HasSubstr("prepacked float"));
    tune_rt_prepacked_reset();
    PrepackArgs args(tmpl.workload(), rng);
    const std::vector<std::vector<float>> original = args.values();
    const int64_t packs0 = runtime::PrepackedPacks();
    EXPECT_EQ(args.CallAndCheck(k.fn(), original), "") << "first call";
    EXPECT_EQ(runtime::PrepackedPacks(), packs0 + 1) << "the first call packs";
    args.NewWeight(rng);
    EXPECT_EQ(args.CallAndCheck(k.fn(), original), "") << "second call: the pack of the original weight";
    EXPECT_EQ(runtime::PrepackedPacks(), packs0 + 1) << "the second call packs nothing";
    tune_rt_prepacked_reset();
    EXPECT_EQ(args.CallAndCheck(k.fn(), args.values()), "") << "after the reset: the new weight";
    EXPECT_EQ(runtime::PrepackedPacks(), packs0 + 2);
  }
}

TEST(CpuPrepackTest, DenseRandomConfigsPackTheWeightOnce) {
  std::mt19937_64 rng(kPrepackSeed);
  for (const char* shape : {"3,37,29", "16,64,48", "1,100,70"}) {
    std::unique_ptr<Template> tmpl = PrepackTemplate(OpKind::kDense, shape, /*bias=*/true, /*relu=*/shape[0] == '3');
    ASSERT_NE(tmpl, nullptr);
    CheckPackedOnce(*tmpl, test::RandomPrepackConfigs(*tmpl, 4, rng), rng, "prepack_dense_");
  }
}

TEST(CpuPrepackTest, ConvNchwRandomConfigsPackTheWeightOnce) {
  std::mt19937_64 rng(kPrepackSeed + 1);
  for (const char* shape : {"1,8,9,9,12,3,3,1,1", "1,6,10,10,20,3,3,2,1"}) {
    std::unique_ptr<Template> tmpl = PrepackTemplate(OpKind::kConv2d, shape, /*bias=*/true, /*relu=*/true);
    ASSERT_NE(tmpl, nullptr);
    CheckPackedOnce(*tmpl, test::RandomPrepackConfigs(*tmpl, 3, rng, /*layout=*/0), rng, "prepack_conv_");
  }
}

TEST(CpuPrepackTest, ConvBlockedRandomConfigsPackTheWeightOnce) {
  std::mt19937_64 rng(kPrepackSeed + 2);
  for (const char* shape : {"1,8,9,9,12,3,3,1,1", "1,16,9,9,16,3,3,1,1,1,16"}) {
    std::unique_ptr<Template> tmpl = PrepackTemplate(OpKind::kConv2d, shape, /*bias=*/true, /*relu=*/false);
    ASSERT_NE(tmpl, nullptr);
    CheckPackedOnce(*tmpl, test::RandomPrepackConfigs(*tmpl, 3, rng, /*layout=*/1), rng, "prepack_blocked_");
  }
}

// Two kernels of different configs reading the same weight address each keep their own pack:
// both stay correct when called in turn, and each reuses its own after the weight changes.
TEST(CpuPrepackTest, TwoKernelsWithTheSameWeightKeepTheirOwnPacks) {
  std::mt19937_64 rng(kPrepackSeed + 3);
  for (OpKind op : {OpKind::kDense, OpKind::kConv2d}) {
    std::unique_ptr<Template> tmpl =
        PrepackTemplate(op, op == OpKind::kDense ? "4,48,40" : "1,8,9,9,24,3,3,1,1", false, false);
    ASSERT_NE(tmpl, nullptr);
    const search::ConfigSpace& space = tmpl->space();
    // Two configs that differ only in the register tile's width (so in the packed layout).
    std::vector<search::Config> configs;
    const std::string tile = op == OpKind::kDense ? "tile_n" : "tile_oc";
    for (const search::Config& c : test::RandomPrepackConfigs(*tmpl, 40, rng)) {
      if (!configs.empty() && space.Get(c, tile).back() == space.Get(configs[0], tile).back()) continue;
      configs.push_back(c);
      if (configs.size() == 2) break;
    }
    ASSERT_EQ(configs.size(), 2u);
    tune_rt_prepacked_reset();
    PrepackKernel a = LoadPrepackKernel(*tmpl, configs[0], "prepack_pair_a");
    PrepackKernel b = LoadPrepackKernel(*tmpl, configs[1], "prepack_pair_b");
    ASSERT_NE(a.loaded, nullptr);
    ASSERT_NE(b.loaded, nullptr);
    PrepackArgs args(tmpl->workload(), rng);
    const std::vector<std::vector<float>> original = args.values();
    const int64_t packs0 = runtime::PrepackedPacks();
    EXPECT_EQ(args.CallAndCheck(a.fn(), original), "") << space.ToJson(configs[0]);
    EXPECT_EQ(args.CallAndCheck(b.fn(), original), "") << space.ToJson(configs[1]);
    EXPECT_EQ(runtime::PrepackedPacks(), packs0 + 2) << "one pack per kernel";
    args.NewWeight(rng);
    EXPECT_EQ(args.CallAndCheck(b.fn(), original), "") << space.ToJson(configs[1]);
    EXPECT_EQ(args.CallAndCheck(a.fn(), original), "") << space.ToJson(configs[0]);
    EXPECT_EQ(runtime::PrepackedPacks(), packs0 + 2);
  }
  tune_rt_prepacked_reset();
}

// Threads calling one kernel at once after a reset: one packs, the others wait for it, all
// outputs are right (each thread has its own input and output, the weight is shared).
TEST(CpuPrepackTest, ConcurrentFirstCallsWaitForThePack) {
  std::mt19937_64 rng(kPrepackSeed + 4);
  // A weight of 2M floats: its pack takes milliseconds, long enough for the other threads to
  // find it half done.
  std::unique_ptr<Template> tmpl = PrepackTemplate(OpKind::kDense, "4,2000,1000", true, false);
  ASSERT_NE(tmpl, nullptr);
  const search::Config config = test::RandomPrepackConfigs(*tmpl, 1, rng)[0];
  PrepackKernel k = LoadPrepackKernel(*tmpl, config, "prepack_threads");
  ASSERT_NE(k.loaded, nullptr);
  const Workload& w = tmpl->workload();
  for (int round = 0; round < 5; ++round) {
    tune_rt_prepacked_reset();
    PrepackArgs shared(w, rng);
    const int64_t packs0 = runtime::PrepackedPacks();
    constexpr int kThreads = 4;
    std::vector<std::string> errors(kThreads);
    std::vector<std::vector<std::vector<float>>> inputs(kThreads);
    std::vector<std::unique_ptr<test::FencedArray>> outs;
    for (int t = 0; t < kThreads; ++t) {
      for (const TensorSpec& spec : w.Inputs()) inputs[t].push_back(test::RandomValues(spec.NumElements(), rng));
      inputs[t][1] = shared.values()[1];
      outs.push_back(std::make_unique<test::FencedArray>(w.Output().NumElements()));
    }
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        // Input 0 and the bias from the thread's own arrays, the weight shared.
        std::vector<float> x = inputs[t][0], bias = inputs[t][2];
        std::vector<float*> args = {x.data(), shared.weight(), bias.data(), outs[t]->data()};
        ++ready;
        while (ready.load() < kThreads) {
        }
        k.fn()(args.data());
        const std::vector<float> want = test::ReferenceOutput(w, inputs[t]);
        for (size_t j = 0; j < want.size(); ++j) {
          if (!(std::fabs(outs[t]->data()[j] - want[j]) <= 1e-4 + 1e-3 * std::fabs(want[j]))) {
            errors[t] = absl::StrCat("thread ", t, " wrong at ", j);
            break;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    for (const std::string& e : errors) EXPECT_EQ(e, "");
    EXPECT_EQ(runtime::PrepackedPacks(), packs0 + 1) << "one thread packs";
  }
  tune_rt_prepacked_reset();
}

// prepack=0 (and configs recorded before the knob) keep their per-call scratch; dense's knob
// applies where B is packed; matmul (activations) has no such knob.
TEST(CpuPrepackTest, KnobAppliesToConstantWeightsOnly) {
  std::unique_ptr<Template> dense = PrepackTemplate(OpKind::kDense, "4,48,40", false, false);
  std::unique_ptr<Template> matmul = PrepackTemplate(OpKind::kMatmul, "4,48,40", false, false);
  ASSERT_NE(dense, nullptr);
  ASSERT_NE(matmul, nullptr);
  bool has_knob = false;
  for (const search::Knob& k : matmul->space().knobs()) has_knob |= k.name == "prepack";
  EXPECT_FALSE(has_knob);
  const search::ConfigSpace& space = dense->space();
  search::Config c = dense->DefaultConfig();
  EXPECT_EQ(space.GetInt(c, "prepack"), 0);
  absl::StatusOr<LoweredFunc> f = dense->Lower(c, "prepack_default");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT(Print(*f), Not(HasSubstr("prepacked")));
  // prepack without pack_b is pinned off (the knob matters only where B is packed).
  c[space.KnobIndex("prepack")] = test::OptionWithValue(space, "prepack", 1);
  EXPECT_FALSE(space.IsValid(c));
  // A config written before the knob parses as prepack=0.
  std::string json = space.ToJson(dense->DefaultConfig());
  const size_t at = json.find("\"prepack\"");
  ASSERT_NE(at, std::string::npos) << json;
  size_t end = json.find_first_of(",}", at);
  if (json[end] == ',') ++end;
  json.erase(at, end - at);
  if (json.size() >= 2 && json[json.size() - 2] == ',') json.erase(json.size() - 2, 1);
  absl::StatusOr<search::Config> old = space.FromJson(json);
  ASSERT_TRUE(old.ok()) << old.status() << " " << json;
  EXPECT_EQ(space.GetInt(*old, "prepack"), 0);
}

// The runtime's cache directly: keys by id text, address and size; a held buffer is never
// evicted; beyond the bound the least recently used free one is.
TEST(CpuPrepackTest, RuntimeCacheKeysAndEviction) {
  tune_rt_prepacked_reset();
  float weight[4] = {1, 2, 3, 4};
  int fresh = -1;
  void* a = tune_rt_prepacked("kernel_a", weight, 4096, &fresh);
  EXPECT_EQ(fresh, 1);
  tune_rt_prepacked_release(a);
  void* again = tune_rt_prepacked("kernel_a", weight, 4096, &fresh);
  EXPECT_EQ(fresh, 0);
  EXPECT_EQ(again, a);
  tune_rt_prepacked_release(again);
  void* b = tune_rt_prepacked("kernel_b", weight, 4096, &fresh);
  EXPECT_EQ(fresh, 1);
  EXPECT_NE(b, a);
  tune_rt_prepacked_release(b);
  void* other = tune_rt_prepacked("kernel_a", weight + 1, 4096, &fresh);
  EXPECT_EQ(fresh, 1);
  tune_rt_prepacked_release(other);
  // Held across a reset: stays usable, and the next call for its key is fresh.
  void* held = tune_rt_prepacked("kernel_a", weight, 4096, &fresh);
  EXPECT_EQ(fresh, 0);
  tune_rt_prepacked_reset();
  std::memset(held, 1, 4096);
  void* after = tune_rt_prepacked("kernel_a", weight, 4096, &fresh);
  EXPECT_EQ(fresh, 1);
  tune_rt_prepacked_release(after);
  tune_rt_prepacked_release(held);
  // 70 keys: the first, held, survives; the second, free and oldest, is packed again.
  tune_rt_prepacked_reset();
  std::vector<char> addresses(70);
  void* first = tune_rt_prepacked("evict", &addresses[0], 64, &fresh);
  for (int i = 1; i < 70; ++i) {
    tune_rt_prepacked_release(tune_rt_prepacked("evict", &addresses[i], 64, &fresh));
    EXPECT_EQ(fresh, 1);
  }
  tune_rt_prepacked_release(tune_rt_prepacked("evict", &addresses[1], 64, &fresh));
  EXPECT_EQ(fresh, 1) << "the oldest free buffer was evicted";
  tune_rt_prepacked_release(tune_rt_prepacked("evict", &addresses[69], 64, &fresh));
  EXPECT_EQ(fresh, 0) << "a recent one was kept";
  tune_rt_prepacked_release(first);
  tune_rt_prepacked_release(tune_rt_prepacked("evict", &addresses[0], 64, &fresh));
  EXPECT_EQ(fresh, 0) << "the held one was kept";
  tune_rt_prepacked_reset();
}

}  // namespace
}  // namespace tune::codegen
