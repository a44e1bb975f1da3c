// Config transfer: workload distance, mapping a config between shapes, and the seeds of a task.
#include "tuner/config_transfer.h"
#include "tuner/nearest_tasks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "measure/target.h"
#include "nlohmann/json.hpp"

namespace tune::tuner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Options of one knob tried, nearest first, when the nearest config breaks a constraint.
constexpr size_t kRepairOptions = 8;
// Knobs changed one after another at most, when no one change repairs a config.
constexpr int kRepairRounds = 3;
// The strategy of the untuned default schedule's records (tuner.cc): a baseline, not a config
// worth starting from.
constexpr char kUntunedStrategy[] = "default";

std::vector<int64_t> ShapeFields(const codegen::Workload& w) {
  if (w.op == codegen::OpKind::kConv2d) {
    return {w.batch,  w.in_c,     w.in_h,     w.in_w,  w.out_c,      w.kernel_h,   w.kernel_w,
            w.stride_h, w.stride_w, w.pad_h + 1, w.pad_w + 1, w.dilation_h, w.dilation_w, w.groups};
  }
  return {w.batch, w.m, w.n, w.k};
}

double LogDistance(int64_t a, int64_t b) {
  return std::abs(std::log2(static_cast<double>(std::max<int64_t>(a, 1))) -
                  std::log2(static_cast<double>(std::max<int64_t>(b, 1))));
}

// How far option `option` of `knob` is from the source's `values` (kInf: not comparable).
double OptionDistance(const search::Knob& knob, const std::vector<int64_t>& option, const std::vector<int64_t>& values) {
  if (knob.kind == search::Knob::Kind::kChoice) {
    if (values.size() != 1) return kInf;
    return option[0] == values[0] ? 0 : 1 + LogDistance(std::abs(option[0] - values[0]) + 1, 1) * 1e-3;
  }
  if (option.size() != values.size()) return kInf;
  double d = 0;
  for (size_t j = 1; j < option.size(); ++j) d += LogDistance(option[j], values[j]);
  // Among equally near options, less padding.
  return d + 1e-6 * static_cast<double>(search::PaddedExtent(option) - knob.extent);
}

// The key of the target that `json` (Target::ToJson) describes, at one thread: the same for
// one machine at every thread count. "" when the text does not parse.
std::string KeyAtOneThread(const std::string& json) {
  absl::StatusOr<measure::Target> target = measure::Target::FromJson(json);
  if (!target.ok()) return "";
  target->threads = 1;
  return target->Key();
}

}  // namespace

double WorkloadDistance(const codegen::Workload& a, const codegen::Workload& b) {
  const bool conv_a = a.op == codegen::OpKind::kConv2d, conv_b = b.op == codegen::OpKind::kConv2d;
  if (conv_a != conv_b) return kInf;
  const std::vector<int64_t> fa = ShapeFields(a), fb = ShapeFields(b);
  double d = a.op == b.op ? 0 : 1;
  for (size_t i = 0; i < fa.size(); ++i) d += LogDistance(fa[i], fb[i]);
  return d;
}

absl::StatusOr<search::Config> MapConfig(const std::string& config_json, const search::ConfigSpace& space) {
  nlohmann::json json = nlohmann::json::parse(config_json, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return absl::InvalidArgumentError("config is not a JSON object");
  const auto& knobs = space.knobs();
  // Per knob, its options ranked by distance to the source's value (the first is taken).
  std::vector<std::vector<std::pair<double, int>>> ranked(knobs.size());
  for (size_t i = 0; i < knobs.size(); ++i) {
    std::vector<int64_t> values;
    auto it = json.find(knobs[i].name);
    if (it != json.end()) {
      if (it->is_number_integer()) values = {it->get<int64_t>()};
      if (it->is_array()) {
        for (const auto& v : *it) {
          if (!v.is_number_integer()) break;
          values.push_back(v.get<int64_t>());
        }
      }
    }
    for (size_t o = 0; o < knobs[i].options.size(); ++o) {
      const double d = values.empty() ? (o == 0 ? 0 : 1) : OptionDistance(knobs[i], knobs[i].options[o], values);
      ranked[i].push_back({d, static_cast<int>(o)});
    }
    std::stable_sort(ranked[i].begin(), ranked[i].end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
  }
  search::Config current(knobs.size());
  for (size_t i = 0; i < knobs.size(); ++i) current[i] = ranked[i][0].second;
  // Repairs, one knob at a time, each moved to one of its next-nearest options (a cost: how
  // much farther from the source that option is): the valid config that costs least; else,
  // where no one change makes it valid (two constraints broken, e.g. a space whose layout fixes
  // two tile factors), the cheapest change that mends the first broken constraint, and again.
  for (int round = 0; round < kRepairRounds && !space.IsValid(current); ++round) {
    const std::string broken = space.WhyInvalid(current);
    double valid_cost = kInf, mend_cost = kInf;
    search::Config valid, mended;
    for (size_t i = 0; i < knobs.size(); ++i) {
      for (size_t r = 1; r < std::min(ranked[i].size(), kRepairOptions + 1); ++r) {
        const double cost = ranked[i][r].first - ranked[i][0].first;
        if (cost >= valid_cost || ranked[i][r].second == current[i]) continue;
        search::Config c = current;
        c[i] = ranked[i][r].second;
        const std::string why = space.WhyInvalid(c);
        if (why.empty()) {
          valid_cost = cost;
          valid = std::move(c);
        } else if (why != broken && cost < mend_cost) {
          mend_cost = cost;
          mended = std::move(c);
        }
      }
    }
    if (!valid.empty()) return valid;
    if (mended.empty()) break;
    current = std::move(mended);
  }
  if (!space.IsValid(current)) return absl::NotFoundError("no valid config near the source config");
  return current;
}

absl::StatusOr<TransferSeeds> TransferConfigs(const dataset::RecordDatabase& db, int64_t target_id, int64_t task_id,
                                              const codegen::Workload& workload, const codegen::Template& tmpl,
                                              const measure::TaskFactory& factory,
                                              const ConfigTransferOptions& options) {
  TransferSeeds seeds;
  if (options.max_configs <= 0) return seeds;
  // Distances first (a parse of each key), templates only for the nearest tasks as they are
  // taken: making the template of every recorded task would cost each new task time and
  // memory in proportion to the database, however few configs it seeds. Likewise only the
  // nearest `candidates` are kept while the tasks table is read, row by row.
  auto similar = NearestTasksByDistance(db, target_id, task_id, workload, options.candidates,
                                        [&](const dataset::TaskInfo& info, double distance) {
                                          return info.template_version == tmpl.version() && std::isfinite(distance);
                                        });
  if (!similar.ok()) return similar.status();
  std::set<search::Config> taken;
  auto full = [&] { return static_cast<int>(seeds.configs.size()) >= options.max_configs; };
  const search::Config own_default = tmpl.DefaultConfig();
  // Up to per_task of the best configs of task `source` on target `on`, mapped into this space
  // (more of its best than it may give: some map onto the same config, or break a constraint
  // of this shape or thread count); `label` names the source when it gives any. With
  // `parallel_forms`, each is followed by its parallel form (Template::ParallelFormOf) where
  // that differs, is valid, is not this task's default (measured already) and max_configs
  // leaves room: the pair counts as one of the source's per_task picks, as two seeds.
  auto take = [&](int64_t source, int64_t on, const std::string& label, bool parallel_forms) -> absl::Status {
    auto best = db.Best(source, on, 4 * std::max(options.per_task, 1));
    if (!best.ok()) return best.status();
    int from_this = 0;
    for (const dataset::Record& rec : *best) {
      if (from_this >= options.per_task || full()) break;
      if (rec.strategy == kUntunedStrategy) continue;
      auto config = MapConfig(rec.config_json, tmpl.space());
      if (!config.ok() || !taken.insert(*config).second) continue;
      seeds.configs.push_back(*config);
      ++from_this;
      if (!parallel_forms || full()) continue;
      search::Config parallel = tmpl.ParallelFormOf(*config);
      if (parallel == *config || !tmpl.space().IsValid(parallel) || parallel == own_default ||
          !taken.insert(parallel).second) {
        continue;
      }
      seeds.configs.push_back(std::move(parallel));
    }
    if (from_this > 0) seeds.sources.push_back(label);
    return absl::OkStatus();
  };
  // The same task on the same machine at another thread count first: its best tiles carry
  // over, and a search at one thread count may miss what another found (the parallel loop's
  // constraints differ, so a config may map to its nearest valid neighbour). A serial config
  // (the best at one thread mostly are) also comes in parallel form where this template uses
  // several threads: seeded alone, a serial kernel was often kept as the best at 2 threads.
  auto targets = db.Targets();
  if (!targets.ok()) return targets.status();
  std::string machine;
  for (const dataset::TargetInfo& t : *targets) {
    if (t.id == target_id) machine = KeyAtOneThread(t.json);
  }
  for (const dataset::TargetInfo& t : *targets) {
    if (machine.empty() || full()) break;
    if (t.id == target_id) continue;
    absl::StatusOr<measure::Target> other = measure::Target::FromJson(t.json);
    if (!other.ok()) continue;
    const int threads = other->threads;
    other->threads = 1;
    if (other->Key() != machine) continue;
    const std::string label = absl::StrCat(workload.Key(), " at t", threads);
    if (absl::Status s = take(task_id, t.id, label, /*parallel_forms=*/true); !s.ok()) return s;
  }
  for (const NearTask& candidate : *similar) {
    if (full()) break;
    const dataset::TaskInfo* info = &candidate.info;
    auto other = factory.MakeTemplate(candidate.workload);
    if (!other.ok() || (*other)->name() != tmpl.name()) continue;
    if (absl::Status s = take(info->id, target_id, info->workload_key, /*parallel_forms=*/false); !s.ok()) return s;
  }
  return seeds;
}

absl::StatusOr<std::vector<search::Config>> SiblingConfigs(const dataset::RecordDatabase& db, int64_t target_id,
                                                           int64_t task_id, const codegen::Workload& workload,
                                                           const codegen::Template& tmpl,
                                                           const measure::TaskFactory& factory, int max_configs) {
  std::vector<search::Config> configs;
  if (max_configs <= 0) return configs;
  // Distance 0 leaves the layout out: twins in another layout may take places, so more are kept
  // than wanted and filtered below.
  auto siblings = NearestTasksByDistance(db, target_id, task_id, workload, std::max(4 * max_configs, 16),
                                         [&](const dataset::TaskInfo& info, double distance) {
                                           return info.template_version == tmpl.version() && distance == 0;
                                         });
  if (!siblings.ok()) return siblings.status();
  for (const NearTask& sibling : *siblings) {
    if (static_cast<int>(configs.size()) >= max_configs) break;
    if (sibling.workload.layout_block != workload.layout_block) continue;
    auto other = factory.MakeTemplate(sibling.workload);
    if (!other.ok() || (*other)->name() != tmpl.name()) continue;
    // Its two fastest: the fastest may be the untuned default schedule.
    auto best = db.Best(sibling.info.id, target_id, 2);
    if (!best.ok()) return best.status();
    for (const dataset::Record& rec : *best) {
      if (rec.strategy == kUntunedStrategy) continue;
      auto config = MapConfig(rec.config_json, tmpl.space());
      if (config.ok() && std::find(configs.begin(), configs.end(), *config) == configs.end()) {
        configs.push_back(*std::move(config));
      }
      break;
    }
  }
  return configs;
}

}  // namespace tune::tuner
