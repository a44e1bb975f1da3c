// Each committed record carries the measurement protocol of its own batch (Tuner::Commit).
#include <random>
#include <string>
#include <vector>

#include "dataset/record_database.h"
#include "gtest/gtest.h"
#include "measure/local_runner.h"
#include "measure/measure_result.h"
#include "measure/target.h"
#include "tests/common/test_db.h"
#include "tests/common/test_seed.h"
#include "tests/common/toy_template.h"
#include "tuner/tuner.h"

namespace tune::test {
namespace {

// The default schedule is measured with a protocol of its own (no warm-up, a longer timeout),
// the search's batches with the options' one: every record says the one it was measured with,
// not the first one its job committed.
TEST(CommitProtocolTest, EachRecordCarriesItsBatchProtocol) {
  auto db = OpenTestDb();
  ASSERT_NE(db, nullptr);
  std::mt19937 rng(std::random_device{}());
  tuner::TuneOptions o;
  o.strategy = "random";
  o.trials_per_task = 8;
  o.batch = 4;
  o.seed = kTestSeed;
  o.finalists = 0;
  o.cutoff_factor = 0;
  o.command = "commit_protocol_test";
  o.protocol.warmup = 1 + static_cast<int>(rng() % 2);
  o.protocol.repeats = 1 + static_cast<int>(rng() % 2);
  o.protocol.min_repeat_ms = 1;
  o.protocol.timeout_s = 20 + static_cast<double>(rng() % 20);
  const tuner::TuneTask task{"mm", ToyWorkload(codegen::OpKind::kMatmul, "16,32,24"), 1};
  tuner::Tuner tuner(db.get(), measure::Target::HostCpu(1), measure::LocalRunner::Factory(1), o);
  auto outcomes = tuner.Run({task});
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  ASSERT_EQ(outcomes->size(), 1u);
  int defaults = 0, searched = 0;
  for (const dataset::Record& r : RecordsOf(*db, (*outcomes)[0].task_id, measure::Target::HostCpu(1).Key())) {
    auto p = measure::MeasureProtocol::FromJson(r.protocol_json);
    ASSERT_TRUE(p.ok()) << p.status();
    if (r.strategy == "default") {
      ++defaults;
      EXPECT_EQ(p->warmup, 0) << r.protocol_json;
      EXPECT_GE(p->timeout_s, 120) << r.protocol_json;
    } else {
      ++searched;
      EXPECT_EQ(p->warmup, o.protocol.warmup) << r.protocol_json;
      EXPECT_EQ(p->repeats, o.protocol.repeats) << r.protocol_json;
      EXPECT_EQ(p->timeout_s, o.protocol.timeout_s) << r.protocol_json;
    }
  }
  EXPECT_EQ(defaults, 1);
  EXPECT_GT(searched, 0);
}

}  // namespace
}  // namespace tune::test
