// Tests of the daemon's background retraining (tuner::Retrainer): when it retrains, what later jobs start from.
#include "tuner/retrainer.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "costmodel/artifact.h"
#include "costmodel/offline_model.h"
#include "dataset/record_database.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"
#include "tests/server/serve_helper.h"
#include "tuner/training_data.h"
#include "tuner/tuner.h"

namespace tune::server {
namespace {

/// An offline model that remembers how many configs it was trained on (its "parameters"), and
/// fails its training while `fail` is set.
class RtCountingModel : public costmodel::OfflineModel {
 public:
  static std::atomic<bool> fail;
  std::string kind() const override { return "test-counting"; }
  costmodel::InputNeeds needs() const override { return {}; }
  bool trained() const override { return configs_ > 0; }
  absl::Status Train(const std::vector<costmodel::TrainGroup>& train, const std::vector<costmodel::TrainGroup>&,
                     const costmodel::TrainOptions&) override {
    if (fail) return absl::InvalidArgumentError("told to fail");
    int64_t n = 0;
    for (const auto& g : train) n += static_cast<int64_t>(g.latencies_s.size());
    configs_ = n;
    return absl::OkStatus();
  }
  std::vector<double> Score(const std::vector<const costmodel::ModelInput*>& inputs) const override {
    return std::vector<double>(inputs.size(), static_cast<double>(configs_));
  }
  absl::StatusOr<std::string> SavePayload() const override { return absl::StrCat("n=", configs_); }
  absl::Status LoadPayload(const std::string& payload) override {
    if (payload.rfind("n=", 0) != 0 || !absl::SimpleAtoi(payload.substr(2), &configs_)) {
      return absl::InvalidArgumentError("not a counting model");
    }
    return absl::OkStatus();
  }
  int64_t configs() const { return configs_; }

 private:
  int64_t configs_ = 0;
};
std::atomic<bool> RtCountingModel::fail{false};

/// Every record of every task of `target_id` as groups (latencies only: the counting model reads no input).
absl::StatusOr<std::vector<costmodel::TrainGroup>> RtLoadGroups(const dataset::RecordDatabase& db, int64_t target_id,
                                                                costmodel::InputNeeds, int) {
  auto tasks = db.Tasks();
  if (!tasks.ok()) return tasks.status();
  std::vector<costmodel::TrainGroup> out;
  for (const auto& t : *tasks) {
    auto records = db.Records(t.id, target_id);
    if (!records.ok()) return records.status();
    if (records->empty()) continue;
    costmodel::TrainGroup g;
    g.name = t.workload_key;
    for (const auto& r : *records) {
      g.latencies_s.push_back(r.result.ok() ? r.result.Median() : INFINITY);
      g.inputs.emplace_back();
    }
    out.push_back(std::move(g));
  }
  return out;
}

/// A database file with two targets, records added on demand.
class RetrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.Join("d.db");
    auto db = dataset::RecordDatabase::Open(path_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    for (const std::string key : {"llvm/cpu-a", "llvm/cpu-b"}) {
      auto id = db_->UpsertTarget({0, key, "{}"});
      ASSERT_TRUE(id.ok());
      targets_.push_back(*id);
    }
    for (int t = 0; t < 2; ++t) {
      dataset::TaskInfo info;
      info.workload_key = absl::StrCat("matmul/", 16 << t);
      info.op = "matmul";
      info.shape_json = "{}";
      auto id = db_->UpsertTask(info);
      ASSERT_TRUE(id.ok());
      tasks_.push_back(*id);
    }
  }

  /// Commits `n` ok records of random latency, alternating between the tasks, on target `t`.
  void AddRecords(int t, int n) {
    std::vector<dataset::Record> records;
    for (int i = 0; i < n; ++i) {
      dataset::Record r;
      r.task_id = tasks_[i % 2];
      r.target_id = targets_[t];
      r.config_json = absl::StrCat("{\"x\": ", next_config_++, "}");
      r.strategy = "random";
      r.protocol_json = "{}";
      r.result.status = measure::MeasureStatus::kOk;
      r.result.costs_s = {std::uniform_real_distribution<double>(1e-4, 1e-2)(rng_)};
      r.result.number = 1;
      records.push_back(std::move(r));
    }
    ASSERT_TRUE(db_->AddRecords(records).ok());
  }

  tuner::RetrainerOptions Options(int64_t every) {
    tuner::RetrainerOptions o;
    o.db_path = path_;
    o.every = every;
    o.make_model = []() -> absl::StatusOr<std::unique_ptr<costmodel::OfflineModel>> {
      return std::make_unique<RtCountingModel>();
    };
    o.load_groups = RtLoadGroups;
    o.on_retrain = [this](const tuner::RetrainEvent& e) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(e);
    };
    return o;
  }

  /// How many configs the latest model of target `t` was trained on; -1 when there is none.
  static int64_t TrainedOn(const tuner::Retrainer& r, const std::string& key) {
    auto m = r.Latest(key);
    if (!m.has_value()) return -1;
    return dynamic_cast<const RtCountingModel&>(*m->model).configs();
  }

  std::vector<tuner::RetrainEvent> Events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

  test::TempDir dir_;
  std::string path_;
  std::unique_ptr<dataset::RecordDatabase> db_;
  std::vector<int64_t> targets_, tasks_;
  std::mt19937_64 rng_ = test::TestRng(3);
  int next_config_ = 1;
  std::mutex mu_;
  std::vector<tuner::RetrainEvent> events_;
};

TEST_F(RetrainTest, RetrainsATargetAfterEveryNNewRecordsOfIt) {
  RtCountingModel::fail = false;
  auto r = tuner::Retrainer::Manual(Options(20));
  ASSERT_TRUE(r.ok()) << r.status();
  AddRecords(0, 19);
  EXPECT_EQ((*r)->CheckNow(), 0);
  EXPECT_EQ(TrainedOn(**r, "llvm/cpu-a"), -1);
  AddRecords(0, 1);
  EXPECT_EQ((*r)->CheckNow(), 1);
  EXPECT_EQ(TrainedOn(**r, "llvm/cpu-a"), 20);
  EXPECT_EQ(TrainedOn(**r, "llvm/cpu-b"), -1);  // another target's records are not its
  ASSERT_EQ(Events().size(), 1u);
  EXPECT_EQ(Events()[0].target_key, "llvm/cpu-a");
  EXPECT_EQ(Events()[0].records, 20);
  EXPECT_EQ(Events()[0].groups, 2);
  EXPECT_EQ(Events()[0].error, "");
  // 19 more: not yet; records of the other target do not count for this one.
  AddRecords(0, 19);
  AddRecords(1, 7);
  EXPECT_EQ((*r)->CheckNow(), 0);
  EXPECT_EQ(TrainedOn(**r, "llvm/cpu-a"), 20);
  AddRecords(0, 1);
  EXPECT_EQ((*r)->CheckNow(), 1);
  EXPECT_EQ(TrainedOn(**r, "llvm/cpu-a"), 40);
  EXPECT_EQ((*r)->retrains(), 2);
  EXPECT_FALSE(tuner::Retrainer::Manual(Options(0)).ok());
}

TEST_F(RetrainTest, AFailedTrainingIsReportedAndRetriedAfterTheNextNRecords) {
  auto r = tuner::Retrainer::Manual(Options(10));
  ASSERT_TRUE(r.ok());
  RtCountingModel::fail = true;
  AddRecords(0, 10);
  EXPECT_EQ((*r)->CheckNow(), 0);
  ASSERT_EQ(Events().size(), 1u);
  EXPECT_EQ(Events()[0].error, "told to fail");
  EXPECT_EQ(TrainedOn(**r, "llvm/cpu-a"), -1);
  RtCountingModel::fail = false;
  EXPECT_EQ((*r)->CheckNow(), 0);  // not retried on every look
  AddRecords(0, 10);
  EXPECT_EQ((*r)->CheckNow(), 1);
  EXPECT_EQ(TrainedOn(**r, "llvm/cpu-a"), 20);
}

TEST_F(RetrainTest, TheBackgroundThreadRetrainsAndALaterJobStartsFromTheModel) {
  RtCountingModel::fail = false;
  tuner::RetrainerOptions o = Options(25);
  o.poll_s = 0.02;
  auto r = tuner::Retrainer::Start(o);
  ASSERT_TRUE(r.ok()) << r.status();
  // A job submitted before any training starts from nothing.
  tuner::TuneOptions early;
  early.strategy = "sa";
  EXPECT_FALSE(tuner::UseLatestModel(r->get(), "llvm/cpu-a", &early));
  EXPECT_EQ(early.pretrained, nullptr);
  AddRecords(0, 30);
  for (int i = 0; i < 500 && (*r)->retrains() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ((*r)->retrains(), 1);
  // A later job starts from a copy of the latest model, and its run record will say which.
  tuner::TuneOptions later;
  later.strategy = "sa";
  ASSERT_TRUE(tuner::UseLatestModel(r->get(), "llvm/cpu-a", &later));
  ASSERT_NE(later.pretrained, nullptr);
  EXPECT_EQ(dynamic_cast<const RtCountingModel&>(*later.pretrained).configs(), 30);
  EXPECT_NE(later.pretrained_note.find("the daemon's test-counting model of llvm/cpu-a (trained on 30 records"),
            std::string::npos)
      << later.pretrained_note;
  // Each job has its own copy.
  tuner::TuneOptions other;
  other.strategy = "evolutionary";
  ASSERT_TRUE(tuner::UseLatestModel(r->get(), "llvm/cpu-a", &other));
  EXPECT_NE(other.pretrained.get(), later.pretrained.get());
  // A job that brought its own artifact keeps it; a target without a model gives none.
  tuner::TuneOptions own;
  own.strategy = "sa";
  own.pretrained = std::make_shared<RtCountingModel>();
  EXPECT_FALSE(tuner::UseLatestModel(r->get(), "llvm/cpu-a", &own));
  EXPECT_EQ(dynamic_cast<const RtCountingModel&>(*own.pretrained).configs(), 0);
  tuner::TuneOptions random;  // ranks nothing: no model for it
  random.strategy = "random";
  EXPECT_FALSE(tuner::UseLatestModel(r->get(), "llvm/cpu-a", &random));
  EXPECT_EQ(random.pretrained, nullptr);
  tuner::TuneOptions elsewhere;
  elsewhere.strategy = "sa";
  EXPECT_FALSE(tuner::UseLatestModel(r->get(), "llvm/cpu-b", &elsewhere));
  EXPECT_FALSE(tuner::UseLatestModel(nullptr, "llvm/cpu-a", &elsewhere));
  r->reset();  // stops the thread
}

// --- a real daemon -----------------------------------------------------------------------------

/// `pattern` in either of `a`'s or `b`'s contents within `limit_s` (a safety limit).
bool RtWaitForEither(const std::string& a, const std::string& b, const std::string& pattern, double limit_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(static_cast<int64_t>(limit_s));
  while (std::chrono::steady_clock::now() < end) {
    if (!test::WaitForMatch(a, pattern, 0.2).empty() || !test::WaitForMatch(b, pattern, 0.2).empty()) return true;
  }
  return false;
}

TEST(RetrainProcessTest, ServeRetrainsAndTheNextJobStartsFromItsModel) {
  {
    auto xgb = costmodel::CreateOfflineModel("xgb");
    auto probe = dataset::RecordDatabase::Open(":memory:");
    ASSERT_TRUE(probe.ok());
    if (!xgb.ok() || *xgb == nullptr || absl::IsUnimplemented(tuner::LoadGroups(**probe, 1, {.ast = true}).status())) {
      GTEST_SKIP() << "this build has no offline xgb model or no LoadGroups";
    }
  }
  test::TempDir dir;
  test::WriteFileBytes(dir.Join("token"), "retrain-test-token\n");
  test::WriteFileBytes(dir.Join("one.json"),
                       R"({"name": "one", "layers": [{"name": "mm", "op": "matmul", "shape": "16,16,16"}]})");
  std::string address;
  test::Subprocess serve, worker;
  ASSERT_FALSE(test::StartServeOnFreePort(serve, dir, "serve", &address,
                                          {"--db", dir.Join("r.db"), "--token-file", dir.Join("token"),
                                           "--retrain-every", "8"})
                   .empty());
  ASSERT_TRUE(worker.Start({test::TuneBinary(), "worker", "--server", address, "--target", "llvm", "--threads", "1",
                            "--token-file", dir.Join("token")},
                           dir.path(), dir.Join("w.out"), dir.Join("w.err")));
  auto submit = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {test::TuneBinary(), "submit", dir.Join("one.json"), "--server", address,
                                     "--token-file", dir.Join("token"), "--trials", "8", "--batch", "4",
                                     "--strategy", "sa", "--repeats", "1", "--min-repeat-ms", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return test::RunProcess(argv, dir.path(), 300);
  };
  test::ProcessResult first = submit({});
  ASSERT_EQ(first.exit_code, 0) << first;
  ASSERT_TRUE(RtWaitForEither(dir.Join("serve.out"), dir.Join("serve.err"), "retrained the .* cost model of .*records", 60))
      << test::ReadFileBytes(dir.Join("serve.out")) << test::ReadFileBytes(dir.Join("serve.err"));
  test::ProcessResult second = submit({});
  ASSERT_EQ(second.exit_code, 0) << second;
  // A corrupt artifact is refused by `tune submit` itself, before the daemon sees the job.
  test::WriteFileBytes(dir.Join("bad.tcm"), "TUNETCM and then nothing a cost model would hold");
  test::ProcessResult bad = submit({"--cost-model", dir.Join("bad.tcm")});
  EXPECT_EQ(bad.exit_code, 2) << bad;

  auto db = dataset::RecordDatabase::Open(dir.Join("r.db"), /*create=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  // A job with an artifact of its own (trained here on the daemon's records) uses that one:
  // its bytes travel with the job.
  {
    auto targets = (*db)->Targets();
    ASSERT_TRUE(targets.ok() && targets->size() == 1u);
    auto model = costmodel::CreateOfflineModel("xgb");
    ASSERT_TRUE(model.ok());
    auto groups = tuner::LoadGroups(**db, (*targets)[0].id, (*model)->needs());
    ASSERT_TRUE(groups.ok()) << groups.status();
    ASSERT_TRUE((*model)->Train(*groups, {}, {}).ok());
    costmodel::ArtifactInfo info;
    info.kind = "xgb";
    info.target_family = "llvm";
    info.target_key = (*targets)[0].key;
    info.created = "2026-01-02T03:04:05Z";
    ASSERT_TRUE(costmodel::WriteArtifactFile(dir.Join("own.tcm"), info, **model).ok());
    // Of another family it is refused before it is sent.
    info.target_family = "cuda";
    ASSERT_TRUE(costmodel::WriteArtifactFile(dir.Join("gpu.tcm"), info, **model).ok());
  }
  test::ProcessResult wrong_family = submit({"--cost-model", dir.Join("gpu.tcm")});
  EXPECT_EQ(wrong_family.exit_code, 2) << wrong_family;
  test::ProcessResult own = submit({"--cost-model", dir.Join("own.tcm")});
  ASSERT_EQ(own.exit_code, 0) << own;

  auto runs = (*db)->Runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].message.find("the daemon's"), std::string::npos) << (*runs)[0].message;
  EXPECT_NE((*runs)[1].message.find("the daemon's xgb model of"), std::string::npos) << (*runs)[1].message;
  EXPECT_NE((*runs)[2].message.find("cost model own.tcm: xgb, created 2026-01-02T03:04:05Z"), std::string::npos)
      << (*runs)[2].message;
}

}  // namespace
}  // namespace tune::server
