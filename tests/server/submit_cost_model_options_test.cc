// Tests that `tune submit --cost-model-option KEY=VALUE` travels with the job to the daemon's TuneOptions.
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "server/proto_convert.h"
#include "tests/common/test_seed.h"
#include "tuner/tuning_flags.h"

namespace tune::test {
namespace {

// The job request `tune submit` would send for these tuning flags (parsed as its command line).
v1::SubmitJobRequest SubmitRequestForCostModelFlags(const std::vector<std::string>& args) {
  CLI::App app{"submit"};
  tuner::TuningFlags flags;
  tuner::AddTuningFlags(app, flags, "--measure-timeout");
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  v1::SubmitJobRequest request;
  const absl::Status st = server::SetTuningFlags(flags, &request);
  EXPECT_TRUE(st.ok()) << st;
  request.set_zoo_name("resnet-18");
  request.set_target("llvm");
  return request;
}

// The options a daemon's job runs with reach its PretrainedCostModels: every
// --cost-model-option given to submit, not the defaults.
TEST(SubmitCostModelOptionsTest, OptionsTravelWithTheJob) {
  std::mt19937_64 rng = TestRng(41);
  for (int round = 0; round < 5; ++round) {
    const double guard_z = std::uniform_real_distribution<double>(2, 50)(rng);
    const int epochs = std::uniform_int_distribution<int>(1, 500)(rng);
    const double share = std::uniform_real_distribution<double>(0.05, 0.95)(rng);
    const double ratio = std::uniform_real_distribution<double>(1, 2)(rng);
    v1::SubmitJobRequest request = SubmitRequestForCostModelFlags(
        {"--cost-model-option", absl::StrFormat("guard_z=%.17g", guard_z), "--cost-model-option",
         absl::StrCat("fine_tune_epochs=", epochs), "--cost-model-option", absl::StrFormat("online_share=%.17g", share),
         "--cost-model-option", absl::StrFormat("weight_max_ratio=%.17g", ratio)});
    ASSERT_EQ(request.cost_model_options_size(), 4);
    absl::StatusOr<tuner::TuneOptions> options = server::TuneOptionsOf(request);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->pretrained_options.guard_z, guard_z);
    EXPECT_EQ(options->pretrained_options.fine_tune_epochs, epochs);
    EXPECT_EQ(options->pretrained_options.online_share, share);
    EXPECT_EQ(options->pretrained_options.weight_max_ratio, ratio);
  }
  // None given: the defaults.
  absl::StatusOr<tuner::TuneOptions> plain = server::TuneOptionsOf(SubmitRequestForCostModelFlags({}));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->pretrained_options.guard_z, costmodel::PretrainedOptions().guard_z);
  EXPECT_EQ(plain->pretrained_options.online_share, costmodel::PretrainedOptions().online_share);
  EXPECT_EQ(plain->pretrained_options.weight_max_ratio, costmodel::PretrainedOptions().weight_max_ratio);
}

// A job request's cost model options are checked as the command line's are: an unknown key,
// a value out of range, and more than 256 of them are refused.
TEST(SubmitCostModelOptionsTest, BadOptionsInARequestAreRefused) {
  for (const std::string& bad : {"no_such_key=1", "online_share=1.5", "online_share=-0.1", "weight_max_ratio=0.9", "guard_z"}) {
    v1::SubmitJobRequest request = SubmitRequestForCostModelFlags({});
    request.add_cost_model_options(bad);
    absl::StatusOr<tuner::TuneOptions> options = server::TuneOptionsOf(request);
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  v1::SubmitJobRequest many = SubmitRequestForCostModelFlags({});
  for (int i = 0; i < server::kMaxStrategyOptions + 1; ++i) many.add_cost_model_options("guard_z=2");
  absl::Status st = server::CheckJobRanges(many);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("cost model options"), std::string::npos) << st;
}

}  // namespace
}  // namespace tune::test
