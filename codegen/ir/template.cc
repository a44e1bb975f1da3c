// Template: the shared validation path of Instantiate/Lower and helpers for templates.
#include "codegen/ir/template.h"

#include "base/check.h"

#include <algorithm>

namespace tune::codegen {

search::Config Template::ConfigOf(
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& values) const {
  search::Config c(space_.knobs().size(), 0);
  for (const auto& [knob, v] : values) {
    int i = space_.KnobIndex(knob);
    const auto& opts = space_.knobs()[i].options;
    auto it = std::find(opts.begin(), opts.end(), v);
    TUNE_CHECK(it != opts.end()) << "knob " << knob << " has no such option";
    c[i] = static_cast<int32_t>(it - opts.begin());
  }
  return c;
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
  TUNE_CHECK(!best.empty()) << "no valid default for " << workload_.Key();
  return best;
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
