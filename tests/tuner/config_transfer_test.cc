// Config transfer: workload distance, mapping configs between shapes, and seeding a new task's
// search from the best configs of a similar recorded task.
#include "tuner/config_transfer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
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

codegen::Workload TransferMatmul(const std::string& shape) {
  return test::ToyWorkload(codegen::OpKind::kMatmul, shape);
}

TEST(ConfigTransferTest, WorkloadDistanceOrdersShapesBySimilarity) {
  const codegen::Workload a = TransferMatmul("64,64,64");
  EXPECT_EQ(WorkloadDistance(a, a), 0);
  EXPECT_LT(WorkloadDistance(a, TransferMatmul("64,64,72")), WorkloadDistance(a, TransferMatmul("512,512,512")));
  EXPECT_DOUBLE_EQ(WorkloadDistance(a, TransferMatmul("128,64,64")), 1.0);
  codegen::Workload conv;
  conv.op = codegen::OpKind::kConv2d;
  conv.batch = 1, conv.in_c = 8, conv.in_h = 8, conv.in_w = 8, conv.out_c = 8, conv.kernel_h = 3, conv.kernel_w = 3;
  EXPECT_TRUE(std::isinf(WorkloadDistance(a, conv)));
}

// A config of one shape's space mapped into a similar shape's space keeps every choice and the
// nearest split factors, and is valid there; the same shape maps onto itself.
TEST(ConfigTransferTest, MapConfigKeepsChoicesAndNearestTiles) {
  auto from = test::MakeTemplate(TransferMatmul("64,64,64"));
  auto to = test::MakeTemplate(TransferMatmul("48,80,72"));
  const search::ConfigSpace& fs = from->space();
  const search::ConfigSpace& ts = to->space();
  std::mt19937_64 rng(test::kTestSeed);
  int mapped = 0;
  for (int i = 0; i < 40; ++i) {
    auto sample = fs.Sample(rng);
    ASSERT_TRUE(sample.ok()) << sample.status();
    const search::Config& c = *sample;
    auto same = MapConfig(fs.ToJson(c), fs);
    ASSERT_TRUE(same.ok()) << same.status();
    EXPECT_EQ(*same, c) << "a config maps onto itself in its own space";
    auto m = MapConfig(fs.ToJson(c), ts);
    if (!m.ok()) {
      EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound) << m.status();
      continue;
    }
    ++mapped;
    ASSERT_TRUE(ts.IsValid(*m)) << ts.ToJson(*m);
    int changed_choices = 0;
    for (size_t k = 0; k < ts.knobs().size(); ++k) {
      const search::Knob& knob = ts.knobs()[k];
      if (knob.kind == search::Knob::Kind::kChoice) {
        changed_choices += knob.options[(*m)[k]] != fs.knobs()[k].options[c[k]] ? 1 : 0;
        continue;
      }
      // No other option of this knob has inner factors nearer to the source's.
      const std::vector<int64_t>& src = fs.knobs()[k].options[c[k]];
      auto dist = [&](const std::vector<int64_t>& o) {
        double d = 0;
        for (size_t j = 1; j < o.size(); ++j) d += std::abs(std::log2(double(o[j])) - std::log2(double(src[j])));
        return d;
      };
      const double got = dist(knob.options[(*m)[k]]);
      double best = got;
      for (const auto& o : knob.options) best = std::min(best, dist(o));
      // One knob may have moved off its nearest option to satisfy a constraint.
      if (got > best + 1e-9) ++changed_choices;
    }
    EXPECT_LE(changed_choices, 1) << fs.ToJson(c) << " -> " << ts.ToJson(*m);
  }
  EXPECT_GE(mapped, 30);
  EXPECT_FALSE(MapConfig("[1,2]", ts).ok());
}

TuneOptions TransferFastOptions(int trials, int batch, int transfer_configs) {
  TuneOptions o = test::FastTuneOptions(trials, batch, "config_transfer_test");
  o.transfer_configs = transfer_configs;
  return o;
}

std::vector<TaskOutcome> TransferRun(dataset::RecordDatabase* db, const TuneTask& task, const TuneOptions& o) {
  Tuner tuner(db, measure::Target::HostCpu(1), measure::LocalRunner::Factory(1), o);
  auto outcomes = tuner.Run({task});
  EXPECT_TRUE(outcomes.ok()) << outcomes.status();
  return outcomes.ok() ? *outcomes : std::vector<TaskOutcome>{};
}

// A new task starts with the best configs of the most similar recorded task, mapped into its
// space and recorded as "transfer"; without config transfer its first records are the strategy's.
TEST(ConfigTransferTest, SeedsANewTaskFromTheMostSimilarRecordedOne) {
  auto db = test::OpenTestDb();
  const TuneTask near{"near", TransferMatmul("16,32,24"), 1};
  const TuneTask far{"far", TransferMatmul("96,8,96"), 1};
  TransferRun(db.get(), near, TransferFastOptions(10, 5, 0));
  TransferRun(db.get(), far, TransferFastOptions(10, 5, 0));
  const std::string target = measure::Target::HostCpu(1).Key();

  const TuneTask fresh{"fresh", TransferMatmul("16,32,28"), 1};
  auto outcomes = TransferRun(db.get(), fresh, TransferFastOptions(6, 3, 2));
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].transferred, 2);
  ASSERT_FALSE(outcomes[0].transfer_sources.empty());
  EXPECT_EQ(outcomes[0].transfer_sources[0], near.workload.Key());

  // At most half the seeds (rounded up) per source task: the fastest config of the near task,
  // mapped into the fresh task's space, then the far task's.
  ASSERT_EQ(outcomes[0].transfer_sources.size(), 2u);
  EXPECT_EQ(outcomes[0].transfer_sources[1], far.workload.Key());
  auto near_info = db->FindTask(near.workload.Key(), test::MakeTemplate(near.workload)->version());
  ASSERT_TRUE(near_info.ok() && near_info->has_value());
  auto target_info = db->FindTarget(target);
  ASSERT_TRUE(target_info.ok() && target_info->has_value());
  // The untuned default schedule's record is never a source.
  auto best = db->Best((*near_info)->id, (*target_info)->id, 12);
  ASSERT_TRUE(best.ok());
  auto searched = std::find_if(best->begin(), best->end(), [](const dataset::Record& r) { return r.strategy != "default"; });
  ASSERT_NE(searched, best->end());
  auto fresh_tmpl = test::MakeTemplate(fresh.workload);
  auto mapped = MapConfig(searched->config_json, fresh_tmpl->space());
  ASSERT_TRUE(mapped.ok()) << mapped.status();

  auto records = test::RecordsOf(*db, outcomes[0].task_id, target);
  std::vector<std::string> transferred;
  for (const auto& r : records) {
    if (r.strategy == "transfer") transferred.push_back(r.config_json);
  }
  ASSERT_EQ(transferred.size(), 2u);
  EXPECT_EQ(transferred[0], fresh_tmpl->space().ToJson(*mapped));
  // Never the fresh task's own default schedule, already measured as "default".
  const std::string own_default = fresh_tmpl->space().ToJson(fresh_tmpl->DefaultConfig());
  for (const std::string& json : transferred) EXPECT_NE(json, own_default);
  // They come first, before the strategy's proposals.
  size_t first_search = 0;
  while (first_search < records.size() && records[first_search].strategy == "default") ++first_search;
  ASSERT_LT(first_search, records.size());
  EXPECT_EQ(records[first_search].strategy, "transfer");

  // Off: the same task in a fresh database of the same records gets no seeds.
  auto db2 = test::OpenTestDb();
  TransferRun(db2.get(), near, TransferFastOptions(10, 5, 0));
  auto off = TransferRun(db2.get(), fresh, TransferFastOptions(6, 3, 0));
  ASSERT_EQ(off.size(), 1u);
  EXPECT_EQ(off[0].transferred, 0);
  for (const auto& r : test::RecordsOf(*db2, off[0].task_id, target)) EXPECT_NE(r.strategy, "transfer");
}

/// The host CPU's task factory, counting the templates it is asked to make.
class TemplateCountingFactory final : public measure::TaskFactory {
 public:
  explicit TemplateCountingFactory(const measure::Target& target)
      : measure::TaskFactory(target), inner_(*measure::TaskFactory::Create(target)) {}
  absl::StatusOr<std::unique_ptr<measure::Task>> Make(const measure::TaskSpec& spec) const override {
    return inner_->Make(spec);
  }
  absl::StatusOr<std::unique_ptr<codegen::Template>> MakeTemplate(const codegen::Workload& workload) const override {
    ++templates_made;
    return inner_->MakeTemplate(workload);
  }
  absl::StatusOr<std::string> KernelSource(const codegen::Workload& workload,
                                           const std::string& config) const override {
    return inner_->KernelSource(workload, config);
  }
  mutable int templates_made = 0;

 private:
  std::unique_ptr<measure::TaskFactory> inner_;
};

// A task tuned at one thread count seeds the same task at another on the same machine (a
// search at 2 threads may miss the tiles one at 1 thread found), before any other task.
TEST(ConfigTransferTest, SeedsATaskFromItsOwnRecordsAtAnotherThreadCount) {
  auto db = test::OpenTestDb();
  const TuneTask task{"mm", TransferMatmul("24,40,32"), 1};
  const TuneTask other{"other", TransferMatmul("24,40,36"), 1};
  TransferRun(db.get(), task, TransferFastOptions(10, 5, 0));  // on HostCpu(1): "...|t1"
  Tuner at_two(db.get(), measure::Target::HostCpu(2), measure::LocalRunner::Factory(1), TransferFastOptions(4, 2, 0));
  ASSERT_TRUE(at_two.Run({other}).ok());  // a nearer-named task measured at 2 threads

  Tuner tuner(db.get(), measure::Target::HostCpu(2), measure::LocalRunner::Factory(1), TransferFastOptions(6, 3, 2));
  auto outcomes = tuner.Run({task});
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_EQ((*outcomes)[0].transferred, 2);
  ASSERT_FALSE((*outcomes)[0].transfer_sources.empty());
  EXPECT_EQ((*outcomes)[0].transfer_sources[0], task.workload.Key() + " at t1");
  // The first seed is the task's fastest config at 1 thread, mapped into the 2-thread space.
  const std::string t1 = measure::Target::HostCpu(1).Key(), t2 = measure::Target::HostCpu(2).Key();
  ASSERT_NE(t1, t2);
  auto info = db->FindTask(task.workload.Key(), test::MakeTemplate(task.workload)->version());
  auto t1_info = db->FindTarget(t1);
  ASSERT_TRUE(info.ok() && info->has_value() && t1_info.ok() && t1_info->has_value());
  auto best = db->Best((*info)->id, (*t1_info)->id, 10);
  ASSERT_TRUE(best.ok() && !best->empty());
  const auto records = test::RecordsOf(*db, (*outcomes)[0].task_id, t2);
  std::vector<std::string> transferred;
  for (const auto& r : records) {
    if (r.strategy == "transfer") transferred.push_back(r.config_json);
  }
  ASSERT_EQ(transferred.size(), 2u);
  // The fastest tuned record at 1 thread: the untuned default is never seeded (on a noisy host
  // it may be the fastest of a short run), it is measured first anyway.
  auto first = std::find_if(best->begin(), best->end(), [](const dataset::Record& r) { return r.strategy != "default"; });
  ASSERT_NE(first, best->end());
  auto tmpl = test::MakeTemplate(task.workload);
  auto mapped = MapConfig(first->config_json, tmpl->space());
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  const std::string expected = tmpl->space().ToJson(*mapped);
  EXPECT_EQ(transferred[0], expected);
}

// `config` with choice knob `name` set to `value`; empty when `value` is not an option.
search::Config TransferWithChoice(const search::ConfigSpace& space, search::Config config, const std::string& name,
                                  int64_t value) {
  const int k = space.KnobIndex(name);
  const auto& options = space.knobs()[k].options;
  auto it = std::find(options.begin(), options.end(), std::vector<int64_t>{value});
  if (it == options.end()) return {};
  config[k] = static_cast<int>(it - options.begin());
  return config;
}

// The default's rule spelled out: a serial config's "parallel" set to 2 (the fused block loops)
// where that is valid, else 1 (the outer loop) where that is; empty where neither is.
search::Config TransferParallelRule(const search::ConfigSpace& space, const search::Config& serial) {
  for (int64_t p : {2, 1}) {
    search::Config c = TransferWithChoice(space, serial, "parallel", p);
    if (!c.empty() && space.IsValid(c)) return c;
  }
  return {};
}

// A task whose best configs at 1 thread are serial seeds the same task at 2 threads with each
// of them followed by its parallel form (the default's rule applied to it), within the seed
// budget: the pair counts as one of the source's picks, each as one seed. At 1 thread, seeds
// from 2 threads come as they are.
TEST(ConfigTransferTest, SeedsTheParallelFormOfASerialConfigAtAnotherThreadCount) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::to_string(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  const measure::Target t1 = measure::Target::HostCpu(1), t2 = measure::Target::HostCpu(2);
  auto factory1 = measure::TaskFactory::Create(t1), factory2 = measure::TaskFactory::Create(t2);
  ASSERT_TRUE(factory1.ok() && factory2.ok());
  int checked = 0;
  for (int round = 0; round < 8; ++round) {
    const codegen::Workload w =
        round % 2 == 0 ? TransferMatmul(uniform(8, 128) + "," + uniform(8, 128) + "," + uniform(8, 64))
                       : test::ToyWorkload(codegen::OpKind::kConv2d, "1," + uniform(4, 48) + "," + uniform(6, 28) + "," +
                                                                         uniform(6, 28) + "," + uniform(4, 64) + ",3,3,1,1");
    SCOPED_TRACE(w.Key());
    auto tmpl1 = (*factory1)->MakeTemplate(w);
    auto tmpl2 = (*factory2)->MakeTemplate(w);
    ASSERT_TRUE(tmpl1.ok() && tmpl2.ok());
    const search::ConfigSpace& space = (*tmpl2)->space();
    const search::Config own_default = (*tmpl2)->DefaultConfig();
    // Two serial configs whose parallel forms exist, the four distinct, none the default.
    std::vector<search::Config> serial, parallel;
    for (int tries = 0; tries < 200 && serial.size() < 2; ++tries) {
      auto sample = space.Sample(rng);
      ASSERT_TRUE(sample.ok()) << sample.status();
      const search::Config s = TransferWithChoice(space, *sample, "parallel", 0);
      if (!space.IsValid(s)) continue;
      const search::Config p = TransferParallelRule(space, s);
      if (p.empty() || p == own_default || s == own_default) continue;
      if (std::find(serial.begin(), serial.end(), s) != serial.end() ||
          std::find(parallel.begin(), parallel.end(), p) != parallel.end()) {
        continue;
      }
      serial.push_back(s);
      parallel.push_back(p);
    }
    if (serial.size() < 2) continue;  // a shape too small to share out on 2 threads
    ++checked;

    auto db = test::OpenTestDb();
    auto id1 = db->UpsertTarget({0, t1.Key(), t1.ToJson()});
    auto id2 = db->UpsertTarget({0, t2.Key(), t2.ToJson()});
    dataset::TaskInfo info;
    info.workload_key = w.Key();
    info.op = codegen::OpName(w.op);
    info.shape_json = "{}";
    info.template_version = (*tmpl2)->version();
    auto task = db->UpsertTask(info);
    ASSERT_TRUE(id1.ok() && id2.ok() && task.ok());
    // At 1 thread the two serial configs were the fastest (the first faster); at 2 threads the
    // first one's parallel form and the second serial one were measured.
    std::vector<dataset::Record> records;
    auto record = [&](int64_t target, const search::Config& c, double cost) {
      dataset::Record r;
      r.task_id = *task;
      r.target_id = target;
      r.config_json = space.ToJson(c);
      r.strategy = "random";
      r.protocol_json = measure::MeasureProtocol().ToJson();
      r.result.status = measure::MeasureStatus::kOk;
      r.result.costs_s = {cost};
      r.result.number = 1;
      records.push_back(r);
    };
    record(*id1, serial[0], 1e-3);
    record(*id1, serial[1], 2e-3);
    record(*id2, parallel[0], 1e-3);
    record(*id2, serial[1], 2e-3);
    ASSERT_TRUE(db->AddRecords(records).ok());

    auto seeds_at = [&](int64_t target, const codegen::Template& tmpl, int max_configs, int per_task) {
      const measure::TaskFactory& factory = target == *id1 ? **factory1 : **factory2;
      ConfigTransferOptions o;
      o.max_configs = max_configs;
      o.per_task = per_task;
      auto seeds = TransferConfigs(*db, target, *task, w, tmpl, factory, o);
      EXPECT_TRUE(seeds.ok()) << seeds.status();
      return seeds.ok() ? *seeds : TransferSeeds{};
    };
    const TransferSeeds at_two = seeds_at(*id2, **tmpl2, 4, 2);
    EXPECT_EQ(at_two.configs, (std::vector<search::Config>{serial[0], parallel[0], serial[1], parallel[1]}));
    EXPECT_EQ(at_two.sources, std::vector<std::string>{w.Key() + " at t1"});
    for (const search::Config& c : at_two.configs) EXPECT_TRUE(space.IsValid(c)) << space.WhyInvalid(c);
    // The budget: max_configs seeds at most, parallel forms included; per_task counts pairs.
    EXPECT_EQ(seeds_at(*id2, **tmpl2, 3, 2).configs,
              (std::vector<search::Config>{serial[0], parallel[0], serial[1]}));
    EXPECT_EQ(seeds_at(*id2, **tmpl2, 4, 1).configs, (std::vector<search::Config>{serial[0], parallel[0]}));
    EXPECT_EQ(seeds_at(*id2, **tmpl2, 1, 1).configs, std::vector<search::Config>{serial[0]});

    // At 1 thread: the 2-thread records as they are (mapped), no form added to the serial one.
    const search::ConfigSpace& space1 = (*tmpl1)->space();
    auto p0 = MapConfig(space.ToJson(parallel[0]), space1), s1 = MapConfig(space.ToJson(serial[1]), space1);
    ASSERT_TRUE(p0.ok() && s1.ok());
    EXPECT_EQ(seeds_at(*id1, **tmpl1, 4, 2).configs, (std::vector<search::Config>{*p0, *s1}));
  }
  EXPECT_GE(checked, 4);
}

// A convolution's NCHWc twin (the same shape with channel-blocked activations) is the nearest
// task there is: `tune MODEL --layout nchwc` on a database that tuned the model in NCHW starts
// each blocked convolution from its NCHW twin's best configs, mapped into the NCHWc space (the
// blocked layout reading the input in the layout's blocks), measured like any other config.
TEST(ConfigTransferTest, SeedsAnNchwcConvolutionFromItsNchwTwin) {
  auto db = test::OpenTestDb();
  auto conv = [](const std::string& shape) {
    absl::StatusOr<codegen::Workload> w = codegen::Workload::Parse(codegen::OpKind::kConv2d, shape);
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? *w : codegen::Workload{};
  };
  const TuneTask nchw{"conv", conv("1,16,8,8,16,3,3,1,1"), 1};
  const TuneTask wider{"wider", conv("1,16,8,8,48,3,3,1,1"), 1};
  TransferRun(db.get(), nchw, TransferFastOptions(8, 4, 0));
  TransferRun(db.get(), wider, TransferFastOptions(8, 4, 0));

  const TuneTask blocked{"conv", conv("1,16,8,8,16,3,3,1,1,nchw8c"), 1};
  auto outcomes = TransferRun(db.get(), blocked, TransferFastOptions(4, 2, 2));
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_GE(outcomes[0].transferred, 1);
  ASSERT_FALSE(outcomes[0].transfer_sources.empty());
  EXPECT_EQ(outcomes[0].transfer_sources[0], nchw.workload.Key());
  auto tmpl = test::MakeTemplate(blocked.workload);
  int seeds = 0;
  for (const auto& r : test::RecordsOf(*db, outcomes[0].task_id, measure::Target::HostCpu(1).Key())) {
    if (r.strategy != "transfer") continue;
    ++seeds;
    EXPECT_TRUE(r.result.ok()) << r.config_json;
    absl::StatusOr<search::Config> c = tmpl->space().FromJson(r.config_json);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(tmpl->space().IsValid(*c)) << tmpl->space().WhyInvalid(*c);
    EXPECT_EQ(tmpl->space().GetInt(*c, "layout"), 1);
    EXPECT_EQ(tmpl->space().GetInt(*c, "in_block"), 1);
  }
  EXPECT_EQ(seeds, outcomes[0].transferred);
}

// The siblings of a task are the tasks of its shape with another epilogue: a conv with a ReLU
// gives the plain conv its fastest searched config; a conv one channel count away, or the same
// conv in another layout, gives none.
TEST(ConfigTransferTest, SiblingConfigsComeOnlyFromTheSameShapeWithAnotherEpilogue) {
  auto db = test::OpenTestDb();
  auto conv = [](const std::string& shape, bool relu) {
    absl::StatusOr<codegen::Workload> w = codegen::Workload::Parse(codegen::OpKind::kConv2d, shape);
    EXPECT_TRUE(w.ok()) << w.status();
    codegen::Workload out = w.ok() ? *w : codegen::Workload{};
    out.relu = relu;
    return out;
  };
  const codegen::Workload plain = conv("1,16,8,8,16,3,3,1,1", false);
  const measure::Target target = measure::Target::HostCpu(1);
  measure::TaskFactoryOptions factory_options;
  auto factory = measure::TaskFactory::Create(target, factory_options);
  ASSERT_TRUE(factory.ok()) << factory.status();
  auto plain_tmpl = test::MakeTemplate(plain);
  auto siblings_of_plain = [&] {
    auto target_info = db->FindTarget(target.Key());
    EXPECT_TRUE(target_info.ok() && target_info->has_value());
    auto configs = SiblingConfigs(*db, (*target_info)->id, /*task_id=*/-1, plain, *plain_tmpl, **factory, 2);
    EXPECT_TRUE(configs.ok()) << configs.status();
    return configs.ok() ? *configs : std::vector<search::Config>{};
  };
  TransferRun(db.get(), {"wider", conv("1,16,8,8,32,3,3,1,1", true), 1}, TransferFastOptions(6, 3, 0));
  TransferRun(db.get(), {"blocked", conv("1,16,8,8,16,3,3,1,1,nchw8c", true), 1}, TransferFastOptions(6, 3, 0));
  EXPECT_TRUE(siblings_of_plain().empty());
  const TuneTask relu{"relu", conv("1,16,8,8,16,3,3,1,1", true), 1};
  auto outcomes = TransferRun(db.get(), relu, TransferFastOptions(6, 3, 0));
  ASSERT_EQ(outcomes.size(), 1u);
  std::string fastest;
  double fastest_s = std::numeric_limits<double>::infinity();
  for (const auto& r : test::RecordsOf(*db, outcomes[0].task_id, target.Key())) {
    if (r.strategy != "default" && r.result.ok() && r.result.Median() < fastest_s) {
      fastest_s = r.result.Median();
      fastest = r.config_json;
    }
  }
  const std::vector<search::Config> siblings = siblings_of_plain();
  ASSERT_EQ(siblings.size(), 1u);
  EXPECT_EQ(plain_tmpl->space().ToJson(siblings[0]), fastest);
}

// Seeding a task looks at the nearest recorded tasks only: with a hundred other tasks in the
// database it makes the templates of the few it takes configs from, not of every task (each
// new task of a daemon that has recorded thousands paid for all of them, in time and memory).
TEST(ConfigTransferTest, SeedingMakesTemplatesOnlyForTheNearestTasks) {
  auto db = test::OpenTestDb();
  const TuneTask near{"near", TransferMatmul("16,32,24"), 1};
  TransferRun(db.get(), near, TransferFastOptions(10, 5, 0));
  const measure::Target target = measure::Target::HostCpu(1);
  auto target_info = db->FindTarget(target.Key());
  ASSERT_TRUE(target_info.ok() && target_info->has_value());
  const int version = test::MakeTemplate(near.workload)->version();
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> extent(40, 400);
  for (int i = 0; i < 100; ++i) {  // tasks recorded without records, all farther than `near`
    const codegen::Workload w =
        TransferMatmul(std::to_string(extent(rng)) + "," + std::to_string(extent(rng)) + "," + std::to_string(extent(rng)));
    dataset::TaskInfo info;
    info.workload_key = w.Key();
    info.op = "matmul";
    info.shape_json = "{}";
    info.template_version = version;
    ASSERT_TRUE(db->UpsertTask(info).ok());
  }
  const codegen::Workload fresh = TransferMatmul("16,32,28");
  auto fresh_tmpl = test::MakeTemplate(fresh);
  TemplateCountingFactory factory(target);
  ConfigTransferOptions options;
  options.max_configs = 1;
  options.per_task = 1;
  auto seeds = TransferConfigs(*db, (*target_info)->id, /*task_id=*/-1, fresh, *fresh_tmpl, factory, options);
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  EXPECT_EQ(seeds->configs.size(), 1u);
  ASSERT_EQ(seeds->sources.size(), 1u);
  EXPECT_EQ(seeds->sources[0], near.workload.Key());
  EXPECT_EQ(factory.templates_made, 1) << "templates made for 101 recorded tasks";
}

// Seeding keeps only the nearest few tasks measured on the target (ConfigTransferOptions::
// candidates) while it reads the tasks table: tasks nearer than the one measured but without
// records there neither crowd it out nor cost a template.
TEST(ConfigTransferTest, SeedingConsidersOnlyTasksMeasuredOnTheTarget) {
  auto db = test::OpenTestDb();
  const TuneTask far{"far", TransferMatmul("96,8,96"), 1};
  TransferRun(db.get(), far, TransferFastOptions(10, 5, 0));
  const measure::Target target = measure::Target::HostCpu(1);
  auto target_info = db->FindTarget(target.Key());
  ASSERT_TRUE(target_info.ok() && target_info->has_value());
  const int version = test::MakeTemplate(far.workload)->version();
  const codegen::Workload fresh = TransferMatmul("16,32,28");
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> m(12, 22), n(24, 44), k(20, 36);
  std::set<std::string> keys = {fresh.Key()};
  while (keys.size() < 41) {  // 40 tasks nearer to `fresh` than `far`, without records
    const codegen::Workload w =
        TransferMatmul(std::to_string(m(rng)) + "," + std::to_string(n(rng)) + "," + std::to_string(k(rng)));
    if (!keys.insert(w.Key()).second) continue;
    ASSERT_LT(WorkloadDistance(fresh, w), WorkloadDistance(fresh, far.workload));
    dataset::TaskInfo info;
    info.workload_key = w.Key();
    info.op = "matmul";
    info.shape_json = "{}";
    info.template_version = version;
    ASSERT_TRUE(db->UpsertTask(info).ok());
  }
  auto fresh_tmpl = test::MakeTemplate(fresh);
  TemplateCountingFactory factory(target);
  ConfigTransferOptions options;
  options.max_configs = 1;
  options.per_task = 1;
  options.candidates = 4;
  auto seeds = TransferConfigs(*db, (*target_info)->id, /*task_id=*/-1, fresh, *fresh_tmpl, factory, options);
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  EXPECT_EQ(seeds->configs.size(), 1u);
  ASSERT_EQ(seeds->sources.size(), 1u);
  EXPECT_EQ(seeds->sources[0], far.workload.Key());
  EXPECT_EQ(factory.templates_made, 1) << "templates made for tasks without records on the target";
}

}  // namespace
}  // namespace tune::tuner

namespace tune::tuner {
namespace {

// Shapes whose extents are prime or odd tune on the CPU: every measured config (tails among
// them, the partial last tile masked) passes the reference check.
TEST(PrimeShapeTuningTest, PrimeExtentsTuneAndVerifyOnTheCpu) {
  auto db = test::OpenTestDb();
  const std::vector<TuneTask> tasks = {
      {"mm97", TransferMatmul("97,89,101"), 1},
      {"conv13", test::ToyWorkload(codegen::OpKind::kConv2d, "1,13,17,19,7,3,3"), 1}};
  TuneOptions o = TransferFastOptions(10, 5, 0);
  o.seed = test::kTestSeed + 5;
  Tuner tuner(db.get(), measure::Target::HostCpu(1), measure::LocalRunner::Factory(1), o);
  auto outcomes = tuner.Run(tasks);
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  ASSERT_EQ(outcomes->size(), 2u);
  for (size_t i = 0; i < tasks.size(); ++i) {
    SCOPED_TRACE(tasks[i].name);
    auto tmpl = test::MakeTemplate(tasks[i].workload);
    const auto records = test::RecordsOf(*db, (*outcomes)[i].task_id, measure::Target::HostCpu(1).Key());
    ASSERT_GE(records.size(), 10u);
    int tails = 0;
    for (const auto& r : records) {
      EXPECT_TRUE(r.result.ok()) << r.config_json << ": " << r.result.message;
      auto config = tmpl->space().FromJson(r.config_json);
      ASSERT_TRUE(config.ok()) << config.status();
      for (size_t k = 0; k < tmpl->space().knobs().size(); ++k) {
        const search::Knob& knob = tmpl->space().knobs()[k];
        if (knob.kind == search::Knob::Kind::kSplit && search::PaddedExtent(knob.options[(*config)[k]]) != knob.extent) {
          ++tails;
          break;
        }
      }
    }
    EXPECT_GT(tails, 0) << "no measured config had a partial tile";
    EXPECT_TRUE(std::isfinite((*outcomes)[i].best_s));
  }
}

}  // namespace
}  // namespace tune::tuner
