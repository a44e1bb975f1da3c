// The tuner measures a template's start points (Template::StartConfigs) first in a task with
// no records of its own, recorded with strategy "start", and not with start_configs off.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "measure/local_runner.h"
#include "measure/target.h"
#include "measure/task_factory.h"
#include "tests/common/fast_tune_options.h"
#include "tests/common/test_db.h"
#include "tests/common/test_seed.h"
#include "tests/common/toy_template.h"
#include "tuner/tuner.h"

namespace tune::tuner {
namespace {

TuneOptions StartOptions(int trials, bool start_configs) {
  TuneOptions o = test::FastTuneOptions(trials, 3, "start_configs_test");
  o.start_configs = start_configs;
  return o;
}

// A conv2d task in an empty database: after its default schedule, the first records are the
// template's start configs in order (strategy "start"), then the strategy's; the outcome
// counts them. Off: no "start" record, and the outcome counts none. A rerun with --resume
// (records of its own) queues none again.
TEST(StartConfigsTest, MeasuredFirstInATaskWithoutRecords) {
  const measure::Target target = measure::Target::HostCpu(1);
  const TuneTask task{"conv", test::ToyWorkload(codegen::OpKind::kConv2d, "1,32,9,9,32,3,3,1,1"), 1};
  auto factory = measure::TaskFactory::Create(target);
  ASSERT_TRUE(factory.ok()) << factory.status();
  auto tmpl = (*factory)->MakeTemplate(task.workload);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  std::vector<std::string> expected;
  for (const search::Config& c : (*tmpl)->StartConfigs()) expected.push_back((*tmpl)->space().ToJson(c));
  if (expected.empty()) GTEST_SKIP() << "no start configs on this CPU (no vector ISA)";
  const int trials = static_cast<int>(expected.size()) + 3;

  for (bool on : {true, false}) {
    auto db = test::OpenTestDb();
    Tuner tuner(db.get(), target, measure::LocalRunner::Factory(1), StartOptions(trials, on));
    auto outcomes = tuner.Run({task});
    ASSERT_TRUE(outcomes.ok()) << outcomes.status();
    ASSERT_EQ(outcomes->size(), 1u);
    EXPECT_EQ((*outcomes)[0].started, on ? static_cast<int>(expected.size()) : 0);
    std::vector<std::string> started, order;
    for (const auto& r : test::RecordsOf(*db, (*outcomes)[0].task_id, target.Key())) {
      if (r.strategy == "start") started.push_back(r.config_json);
      order.push_back(r.strategy);
    }
    if (!on) {
      EXPECT_TRUE(started.empty());
      continue;
    }
    EXPECT_EQ(started, expected);
    ASSERT_GE(order.size(), expected.size() + 2);
    EXPECT_EQ(order[0], "default");
    for (size_t i = 1; i <= expected.size(); ++i) EXPECT_EQ(order[i], "start") << i;
    EXPECT_EQ(order[expected.size() + 1], "random");

    TuneOptions more = StartOptions(trials + 3, true);
    more.resume = true;
    Tuner again(db.get(), target, measure::LocalRunner::Factory(1), more);
    auto resumed = again.Run({task});
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    EXPECT_EQ((*resumed)[0].started, 0);
  }
}

}  // namespace
}  // namespace tune::tuner
