// Template: the shared validation path of Instantiate/Lower and helpers for templates.
#include "codegen/ir/template.h"

#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tune::codegen {

search::Config Template::ConfigOf(
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& values) const {
  search::Config c(space_.knobs().size(), 0);
  for (const auto& [knob, v] : values) {
    int i = space_.KnobIndex(knob);
    const auto& opts = space_.knobs()[i].options;
    auto it = std::find(opts.begin(), opts.end(), v);
    if (it == opts.end()) return {};  // ValidDefaultConfig says so
    c[i] = static_cast<int32_t>(it - opts.begin());
  }
  return c;
}

std::vector<int64_t> Template::SplitOption(const std::string& knob, int64_t outer, int64_t inner) const {
  const std::vector<int64_t>* best = nullptr;
  for (const std::vector<int64_t>& o : space_.knobs()[space_.KnobIndex(knob)].options) {
    if (o.back() != inner) continue;
    if (o.front() == outer) return o;
    if (best == nullptr || o.front() < best->front()) best = &o;
  }
  return best != nullptr ? *best : std::vector<int64_t>{};
}

void Template::AddStartConfig(const std::vector<std::pair<std::string, std::vector<int64_t>>>& values,
                              std::vector<search::Config>* out) const {
  search::Config c = ConfigOf(values);
  if (c.empty()) return;
  c = ParallelFormOf(space_.Canonical(c));
  if (!space_.IsValid(c) || c == DefaultConfig() || std::find(out->begin(), out->end(), c) != out->end()) return;
  out->push_back(std::move(c));
}

search::Config Template::ParallelDefault(search::Config config, int threads,
                                         const std::vector<int64_t>& parallel_options) const {
  if (threads <= 1 || config.empty() || space_.GetInt(config, "parallel") != 0) return config;
  const int knob = space_.KnobIndex("parallel");
  const auto& opts = space_.knobs()[knob].options;
  for (int64_t p : parallel_options) {
    auto it = std::find(opts.begin(), opts.end(), std::vector<int64_t>{p});
    if (it == opts.end()) continue;
    search::Config c = config;
    c[knob] = static_cast<int32_t>(it - opts.begin());
    if (space_.IsValid(c)) return c;
  }
  return config;
}

std::vector<Buffer> ArgBuffers::args() const {
  std::vector<Buffer> list = {input0, input1};
  if (bias) list.push_back(bias);
  list.push_back(out);
  return list;
}

Expr ApplyEpilogue(const Workload& workload, Expr v, const Buffer& bias, const Expr& channel) {
  if (bias) v = v + Load(bias, {channel});
  if (workload.relu) v = Max(v, FloatImm(0.0));
  if (workload.relu6) v = Min(Max(v, FloatImm(0.0)), FloatImm(6.0));
  return v;
}

ArgBuffers Template::MakeArgBuffers() const {
  const std::vector<TensorSpec> inputs = workload_.Inputs();
  ArgBuffers b;
  int arg = 0;
  b.input0 = MakeBuffer(inputs[0].name, inputs[0].shape, BufferScope::kArg, arg++);
  b.input1 = MakeBuffer(inputs[1].name, inputs[1].shape, BufferScope::kArg, arg++);
  if (workload_.bias) b.bias = MakeBuffer(inputs[2].name, inputs[2].shape, BufferScope::kArg, arg++);
  b.out = MakeBuffer(workload_.Output().name, workload_.Output().shape, BufferScope::kArg, arg++);
  return b;
}

search::Config Template::BestScoring(const std::function<std::optional<int64_t>(const search::Config&)>& score,
                                     const std::vector<std::string>& held) const {
  // Mixed radix over the knobs not held, the first varying slowest (index order).
  const auto& knobs = space_.knobs();
  std::vector<bool> is_held(knobs.size(), false);
  for (const std::string& name : held) is_held[space_.KnobIndex(name)] = true;
  uint64_t size = 1;
  for (size_t k = 0; k < knobs.size(); ++k) {
    if (!is_held[k]) size *= knobs[k].options.size();
  }
  search::Config best;
  int64_t best_score = 0;
  for (uint64_t i = 0; i < size; ++i) {
    search::Config c(knobs.size(), 0);
    for (uint64_t k = knobs.size(), rest = i; k-- > 0;) {
      if (is_held[k]) continue;
      c[k] = static_cast<int32_t>(rest % knobs[k].options.size());
      rest /= knobs[k].options.size();
    }
    std::optional<int64_t> v = score(c);
    if (!v.has_value() || !space_.IsValid(c)) continue;
    if (best.empty() || *v > best_score) {
      best = std::move(c);
      best_score = *v;
    }
  }
  return best;  // empty when none: ValidDefaultConfig says so
}

absl::StatusOr<search::Config> Template::ValidDefaultConfig() const {
  search::Config def = DefaultConfig();
  if (!def.empty() && space_.IsValid(def)) return def;
  // Why: the constraints that fail first on a fixed sample of the space, most frequent first.
  std::map<std::string, int> failing;
  int tried = 0, valid = 0;
  std::mt19937_64 rng(0x5eed);
  constexpr int kSamples = 4096;
  for (int i = 0; i < kSamples; ++i, ++tried) {
    std::string why = space_.WhyInvalid(space_.Draw(rng));
    if (why.empty()) {
      ++valid;
    } else {
      ++failing[why];
    }
  }
  std::vector<std::pair<int, std::string>> ranked;
  for (const auto& [name, n] : failing) ranked.push_back({n, name});
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string what = "configuration", reason;
  if (valid > 0 || ranked.empty()) {
    what = "default configuration";
    reason = "its plain untuned kernel does not fit this shape";
  } else if (ranked.size() == 1) {
    reason = absl::StrCat("constraint '", ranked[0].second, "' rules out every configuration tried");
  } else {
    reason = absl::StrCat("constraints '", ranked[0].second, "' and '", ranked[1].second,
                          "' rule out most of the configurations tried");
  }
  const std::string key = workload_.Key();
  const size_t slash = key.find('/');
  const std::string shape = slash == std::string::npos ? key : key.substr(slash + 1, key.find('/', slash + 1) - slash - 1);
  return absl::InvalidArgumentError(absl::StrCat(OpName(workload_.op), " ", shape, ": no valid ", what, " of the ",
                                                 name(), " template for this shape (", reason, ")"));
}

absl::StatusOr<Schedule> Template::Instantiate(const search::Config& config) const {
  std::string why = space_.WhyInvalid(config);
  if (!why.empty()) return absl::InvalidArgumentError("config violates constraint '" + why + "'");
  return Build(config);
}

absl::StatusOr<LoweredFunc> Template::Lower(const search::Config& config, const std::string& name) const {
  auto sched = Instantiate(config);
  if (!sched.ok()) return sched.status();
  sched->name = name;
  return sched->Lower();
}

}  // namespace tune::codegen
