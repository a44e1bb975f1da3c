// LocalRunner and weights packed once (prepack): the checked first call packs, the timed calls
// reuse the pack, and the ok record says so; per-call packing leaves the message empty.
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/runtime.h"
#include "codegen/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/host_builder.h"
#include "measure/kernel_task.h"
#include "measure/local_runner.h"
#include "nlohmann/json.hpp"
#include "search/space.h"
#include "tests/common/test_seed.h"

namespace tune::measure {
namespace {

/// `tmpl`'s default config with the knobs of `changes` (JSON values) set; empty when not valid.
search::Config PrepackRunnerConfig(const codegen::Template& tmpl, const nlohmann::json& changes) {
  const search::ConfigSpace& space = tmpl.space();
  nlohmann::json j = nlohmann::json::parse(space.ToJson(tmpl.DefaultConfig()));
  for (auto it = changes.begin(); it != changes.end(); ++it) j[it.key()] = it.value();
  absl::StatusOr<search::Config> c = space.FromJson(j.dump());
  EXPECT_TRUE(c.ok()) << c.status() << " " << j.dump();
  if (!c.ok()) return {};
  const search::Config canonical = space.Canonical(*c);  // knobs the change made moot at option 0
  EXPECT_EQ(space.WhyInvalid(canonical), "") << j.dump();
  return canonical;
}

TEST(LocalRunnerPrepackTest, OkRecordSaysTheWeightWasPackedOnceOutsideTheTimedCalls) {
  struct Case {
    codegen::OpKind op;
    const char* shape;
    nlohmann::json packed_once, packed_per_call;
  };
  const std::vector<Case> cases = {
      {codegen::OpKind::kDense, "6,40,36", {{"pack_b", {1}}, {"prepack", {1}}}, {{"pack_b", {1}}, {"prepack", {0}}}},
      {codegen::OpKind::kConv2d, "1,4,9,9,12,3,3,1,1",
       {{"pack_weight", {1}}, {"prepack", {1}}}, {{"pack_weight", {1}}, {"prepack", {0}}}},
      {codegen::OpKind::kConv2d, "1,4,9,9,12,3,3,1,1", {{"layout", {1}}, {"tile_oc", {1, 1, 12}}, {"prepack", {1}}},
       {{"layout", {1}}, {"tile_oc", {1, 1, 12}}}},
  };
  MeasureProtocol protocol;
  protocol.warmup = 1;
  protocol.repeats = 3;
  protocol.min_repeat_ms = 1;
  std::mt19937_64 rng = test::TestRng(41);
  for (const Case& c : cases) {
    absl::StatusOr<codegen::Workload> w = codegen::Workload::Parse(c.op, c.shape);
    ASSERT_TRUE(w.ok()) << w.status();
    w->bias = true;
    absl::StatusOr<std::unique_ptr<codegen::Template>> tmpl = codegen::CreateTemplate(*w);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    const search::Config once = PrepackRunnerConfig(**tmpl, c.packed_once);
    const search::Config per_call = PrepackRunnerConfig(**tmpl, c.packed_per_call);
    ASSERT_FALSE(once.empty());
    ASSERT_FALSE(per_call.empty());
    std::optional<TaskData> data = CreateTaskData(*w, rng(), /*with_reference=*/true, nullptr);
    ASSERT_TRUE(data.has_value());
    const HostBuilder builder;
    LocalRunner runner(LocalRunnerOptions{protocol, 2});
    // The parent has packed nothing; the children's packs stay in the children.
    const int64_t packs = codegen::runtime::PrepackedPacks();
    std::vector<MeasureResult> results = runner.Run(*data, {builder.Build(**tmpl, once), builder.Build(**tmpl, per_call)});
    EXPECT_EQ(codegen::runtime::PrepackedPacks(), packs);
    ASSERT_EQ(results.size(), 2u);
    SCOPED_TRACE(w->Key());
    EXPECT_EQ(results[0].status, MeasureStatus::kOk) << results[0].message;
    EXPECT_EQ(results[0].message, LocalRunner::kPackedOnceNote);
    EXPECT_EQ(results[0].costs_s.size(), 3u);
    EXPECT_EQ(results[1].status, MeasureStatus::kOk) << results[1].message;
    EXPECT_EQ(results[1].message, "");
  }
}

}  // namespace
}  // namespace tune::measure
