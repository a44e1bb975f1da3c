// Tests of LoadTrainingData / LoadGroups on the committed small dataset: split, counts, features, xgb on top.
#include "tuner/training_data.h"

#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "costmodel/features.h"
#include "dataset/record_exchange.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"
#include "tuner/model_file.h"

namespace tune::tuner {
namespace {

using ::testing::HasSubstr;

const std::string kTdData = std::string(TUNE_SOURCE_DIR) + "/tests/data/costmodel/small-llvm.records.jsonl.gz";
const std::string kTdNetworks = std::string(TUNE_SOURCE_DIR) + "/tests/data/costmodel/networks";

// Every record of the small dataset, read independently of LoadTrainingData (zlib + the
// exchange format's line parser).
std::vector<dataset::PortableRecord> TdReadAll() {
  std::vector<dataset::PortableRecord> out;
  gzFile f = gzopen(kTdData.c_str(), "rb");
  EXPECT_NE(f, nullptr) << kTdData;
  if (f == nullptr) return out;
  std::string text;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) text.append(buf, n);
  gzclose(f);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (end > pos) {
      auto r = dataset::RecordFromJsonLine(std::string_view(text).substr(pos, end - pos));
      EXPECT_TRUE(r.ok()) << r.status();
      if (r.ok()) out.push_back(*std::move(r));
    }
    pos = end + 1;
  }
  return out;
}

// Usable records per workload key: ok ones and kernels that failed when run.
std::map<std::string, int> TdUsableByKey(const std::vector<dataset::PortableRecord>& all) {
  std::map<std::string, int> n;
  for (const auto& r : all) {
    const auto s = r.record.result.status;
    if (s == measure::MeasureStatus::kOk || s == measure::MeasureStatus::kRuntimeError ||
        s == measure::MeasureStatus::kTimeout || s == measure::MeasureStatus::kWrongResult)
      ++n[r.task.workload_key];
  }
  return n;
}

TrainingDataOptions TdOptions() {
  TrainingDataOptions o;
  o.data_path = kTdData;
  o.networks = {kTdNetworks};
  o.holdout = {"tiny-cnn-b"};
  o.valid_share = 0.2;
  o.seed = 4;
  o.needs = {.ast = true};
  o.threads = 2;
  return o;
}

std::set<int64_t> TdIds(const std::vector<costmodel::TrainGroup>& groups) {
  std::set<int64_t> ids;
  for (const auto& g : groups) ids.insert(g.task_id);
  return ids;
}

TEST(TrainingDataTest, SmallDatasetSplitsByNetworkWithRightCounts) {
  const auto all = TdReadAll();
  ASSERT_GE(all.size(), 300u);
  const auto usable = TdUsableByKey(all);
  int64_t progress_calls = 0, last_done = -1, last_total = -1;
  auto data = LoadTrainingData(TdOptions(), [&](int64_t done, int64_t total) {
    ++progress_calls;
    EXPECT_LE(done, total);
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
  });
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_GT(progress_calls, 0);
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(data->target_family, "llvm");
  EXPECT_EQ(data->target_key.rfind("llvm|", 0), 0u) << data->target_key;

  // The held-out network's tasks (its conv shared with tiny-cnn-a included) are the test set.
  auto held = LoadModel(kTdNetworks + "/tiny-cnn-b.json");
  ASSERT_TRUE(held.ok());
  std::set<std::string> held_keys, test_keys;
  for (const auto& layer : held->layers) held_keys.insert(layer.workload.Key());
  for (const auto& g : data->test) test_keys.insert(g.name);
  EXPECT_EQ(test_keys, held_keys);
  for (const auto* set : {&data->train, &data->valid}) {
    for (const auto& g : *set) EXPECT_EQ(held_keys.count(g.name), 0u) << g.name << " trained on";
  }
  // Whole tasks: no task in two sets; validation is 20% of the training tasks.
  const auto train_ids = TdIds(data->train), valid_ids = TdIds(data->valid), test_ids = TdIds(data->test);
  for (int64_t id : valid_ids) EXPECT_EQ(train_ids.count(id), 0u);
  for (int64_t id : test_ids) EXPECT_EQ(train_ids.count(id) + valid_ids.count(id), 0u);
  const size_t trainable = data->train.size() + data->valid.size();
  EXPECT_EQ(trainable + data->test.size(), usable.size());
  EXPECT_EQ(data->valid.size(), static_cast<size_t>(std::llround(0.2 * static_cast<double>(trainable))));

  // Every usable record of every task is in its group, featurized, with its latency.
  int64_t total = 0;
  for (const auto* set : {&data->train, &data->valid, &data->test}) {
    for (const auto& g : *set) {
      EXPECT_EQ(static_cast<int>(g.inputs.size()) + 0, usable.at(g.name)) << g.name;
      ASSERT_EQ(g.inputs.size(), g.latencies_s.size());
      int finite = 0;
      for (size_t i = 0; i < g.inputs.size(); ++i) {
        EXPECT_EQ(g.inputs[i].ast.size(), costmodel::kNumFeatures);
        EXPECT_EQ(g.inputs[i].graph.num_nodes, 0);
        EXPECT_TRUE(g.latencies_s[i] > 0) << g.latencies_s[i];
        finite += std::isfinite(g.latencies_s[i]) ? 1 : 0;
      }
      EXPECT_GE(finite, 2) << g.name;
      total += static_cast<int64_t>(g.inputs.size());
    }
  }
  EXPECT_EQ(total, data->records);
  EXPECT_EQ(data->skipped, 0);
  EXPECT_FALSE(data->template_versions.empty());

  // The held-out network over the test groups, weighted by layer counts (its "down" conv twice).
  ASSERT_EQ(data->test_networks.size(), 1u);
  const TestNetwork& tn = data->test_networks[0];
  EXPECT_EQ(tn.name, "tiny-cnn-b");
  ASSERT_EQ(tn.network.tasks.size(), held->layers.size());
  double weights = 0;
  for (const auto& w : tn.network.tasks) {
    ASSERT_LT(w.task, data->test.size());
    weights += w.weight;
  }
  EXPECT_EQ(weights, 5);
  EXPECT_THAT(data->summary_json, HasSubstr("tiny-cnn-b"));
}

TEST(TrainingDataTest, DatabaseAndDataFileGiveTheSameGroups) {
  test::TempDir dir;
  const std::string db_path = dir.Join("small.db");
  {
    auto db = dataset::RecordDatabase::Open(db_path, true);
    ASSERT_TRUE(db.ok());
    auto counts = (*db)->ImportRecords(TdReadAll());
    ASSERT_TRUE(counts.ok()) << counts.status();
  }
  TrainingDataOptions from_db = TdOptions();
  from_db.data_path.clear();
  from_db.db_path = db_path;
  from_db.max_per_task = 12;
  TrainingDataOptions from_file = TdOptions();
  from_file.max_per_task = 12;
  from_file.threads = 1;
  auto a = LoadTrainingData(from_db);
  auto b = LoadTrainingData(from_file);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->train.size(), b->train.size());
  ASSERT_EQ(a->test.size(), b->test.size());
  for (size_t i = 0; i < a->train.size(); ++i) {
    EXPECT_EQ(a->train[i].name, b->train[i].name);
    EXPECT_LE(a->train[i].inputs.size(), 12u);
    EXPECT_EQ(a->train[i].latencies_s, b->train[i].latencies_s);
    ASSERT_EQ(a->train[i].inputs.size(), b->train[i].inputs.size());
    for (size_t j = 0; j < a->train[i].inputs.size(); ++j)
      EXPECT_EQ(a->train[i].inputs[j].ast, b->train[i].inputs[j].ast);
  }
  // The whole database as groups of one target (for the daemon).
  auto db = dataset::RecordDatabase::OpenReadOnly(db_path);
  ASSERT_TRUE(db.ok());
  auto targets = (*db)->Targets();
  ASSERT_TRUE(targets.ok());
  ASSERT_EQ(targets->size(), 1u);
  auto groups = LoadGroups(**db, (*targets)[0].id, {.ast = true}, 5);
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_EQ(groups->size(), TdUsableByKey(TdReadAll()).size());
  for (const auto& g : *groups) {
    EXPECT_LE(g.inputs.size(), 5u);
    EXPECT_GE(g.inputs.size(), 1u);
  }
  EXPECT_FALSE(LoadGroups(**db, 999, {.ast = true}).ok());
}

TEST(TrainingDataTest, ValidationShareIsSeededWholeTasks) {
  TrainingDataOptions o = TdOptions();
  o.max_per_task = 4;
  auto a = LoadTrainingData(o);
  auto b = LoadTrainingData(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(TdIds(a->valid), TdIds(b->valid));
  // Over several seeds the validation tasks are not always the same ones.
  std::set<std::set<int64_t>> seen;
  for (uint64_t seed = 10; seed < 16; ++seed) {
    o.seed = seed;
    auto c = LoadTrainingData(o);
    ASSERT_TRUE(c.ok());
    seen.insert(TdIds(c->valid));
  }
  EXPECT_GT(seen.size(), 1u);
  // Without a holdout every task trains or validates.
  o.holdout.clear();
  auto all = LoadTrainingData(o);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->test.empty());
  EXPECT_EQ(all->train.size() + all->valid.size(), TdUsableByKey(TdReadAll()).size());
}

TEST(TrainingDataTest, BadRequestsAreOneLineErrors) {
  test::TempDir dir;
  auto expect_invalid = [](const absl::StatusOr<TrainingData>& d, const std::string& why) {
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(std::string(d.status().message()), HasSubstr(why));
    EXPECT_EQ(std::string(d.status().message()).find('\n'), std::string::npos);
  };
  TrainingDataOptions both = TdOptions();
  both.db_path = dir.Join("x.db");
  expect_invalid(LoadTrainingData(both), "exactly one");
  TrainingDataOptions unknown = TdOptions();
  unknown.holdout = {"no-such-net"};
  expect_invalid(LoadTrainingData(unknown), "no-such-net");
  TrainingDataOptions everything = TdOptions();
  everything.holdout = {"tiny-cnn-a", "tiny-cnn-b", "tiny-mlp", "tiny-mobile"};
  expect_invalid(LoadTrainingData(everything), "every network");
  TrainingDataOptions gpu = TdOptions();
  gpu.target = "cuda";
  expect_invalid(LoadTrainingData(gpu), "no records of target 'cuda'");
  // A data file with a bad line names the file and the line.
  const std::string bad = dir.Join("bad.jsonl");
  {
    auto all = TdReadAll();
    std::ofstream out(bad);
    for (size_t i = 0; i < 3; ++i) out << *dataset::RecordToJsonLine(all[i]) << "\n";
    out << "{\"format\": \"tune-records/1\", \"task\": 7}\n";
  }
  TrainingDataOptions bad_file = TdOptions();
  bad_file.data_path = bad;
  expect_invalid(LoadTrainingData(bad_file), "bad.jsonl:4");
  TrainingDataOptions missing = TdOptions();
  missing.data_path = dir.Join("missing.jsonl.gz");
  EXPECT_EQ(LoadTrainingData(missing).status().code(), absl::StatusCode::kNotFound);
  // A truncated gzip file is refused too (a cut stream, or a cut line that no longer parses).
  const std::string cut = dir.Join("cut.jsonl.gz");
  {
    std::ifstream in(kTdData, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  TrainingDataOptions cut_file = TdOptions();
  cut_file.data_path = cut;
  EXPECT_EQ(LoadTrainingData(cut_file).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TrainingDataTest, XgbTrainedOnSmallDatasetRanksHeldOutTasks) {
  auto data = LoadTrainingData(TdOptions());
  ASSERT_TRUE(data.ok()) << data.status();
  auto model = costmodel::CreateOfflineModel("xgb");
  ASSERT_TRUE(model.ok());
  costmodel::TrainOptions o;
  o.seed = 9;
  o.threads = 2;
  o.max_epochs = 40;
  o.patience = 4;
  ASSERT_TRUE((*model)->Train(data->train, data->valid, o).ok());
  const costmodel::EvalMetrics test = costmodel::EvaluateGroups(**model, data->test);
  EXPECT_EQ(test.groups, static_cast<int>(data->test.size()));
  // A constant model scores exactly 0.5 pairwise and 0 Kendall: demand a clear margin.
  EXPECT_GE(test.pairwise, 0.6) << "kendall " << test.kendall << " top1 " << test.top1;
  EXPECT_GE(test.kendall, 0.2);
  // The same seed gives the same model.
  auto again = costmodel::CreateOfflineModel("xgb");
  ASSERT_TRUE((*again)->Train(data->train, data->valid, o).ok());
  for (const auto& g : data->test) {
    std::vector<const costmodel::ModelInput*> in;
    for (const auto& x : g.inputs) in.push_back(&x);
    EXPECT_EQ((*model)->Score(in), (*again)->Score(in));
  }
}

// The LSTM and GNN models on the same committed dataset (the LibTorch module; skipped in builds
// without it): trained in seconds, they rank the held-out network's tasks clearly better than
// a constant model (pairwise 0.5, Kendall 0).
TEST(TrainingDataTest, SequenceAndGraphModelsTrainedOnSmallDatasetRankHeldOutTasks) {
  TrainingDataOptions opts = TdOptions();
  opts.needs = {.ast = false, .graph = true};
  auto data = LoadTrainingData(opts);
  ASSERT_TRUE(data.ok()) << data.status();
  for (const char* kind : {"lstm", "gnn"}) {
    auto model = costmodel::CreateOfflineModel(kind);
    if (absl::IsUnimplemented(model.status())) GTEST_SKIP() << model.status();
    ASSERT_TRUE(model.ok()) << model.status();
    costmodel::TrainOptions o;
    o.seed = 9;
    o.threads = 2;
    o.max_epochs = 12;
    o.patience = 4;
    ASSERT_TRUE((*model)->Train(data->train, data->valid, o).ok()) << kind;
    const costmodel::EvalMetrics test = costmodel::EvaluateGroups(**model, data->test);
    EXPECT_GE(test.pairwise, 0.6) << kind << ": kendall " << test.kendall << " top1 " << test.top1;
    EXPECT_GE(test.kendall, 0.2) << kind;
  }
}

}  // namespace
}  // namespace tune::tuner
