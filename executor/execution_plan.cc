// ExecutionPlan: kernels made per node, buffers placed by live interval, pointers bound once.
#include "executor/execution_plan.h"


#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/runtime/runtime.h"
#include "executor/builtin_ops.h"
#include "measure/target.h"

namespace tune::executor {

int64_t TensorDesc::NumElements() const {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

int64_t TensorDesc::Bytes() const { return NumElements() * graph::DTypeSize(dtype); }

struct ExecutionPlan::Step {
  const OpKernel* op = nullptr;      // a built-in kernel, or
  const TaskKernel* task = nullptr;  // a tuned kernel
  StepInfo info;                     // the node it runs, for profiles
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<float*> args;          // task: inputs then output
};

ExecutionPlan::~ExecutionPlan() = default;

int ExecutionPlan::steps() const { return static_cast<int>(steps_.size()); }

namespace {

/// Where a tensor's data lies while the plan is made: an arena buffer (by index) or a
/// constant's bytes.
struct Storage {
  int buffer = -1;
  const void* constant = nullptr;
};

absl::Status NodeError(const graph::Node& node, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("node '", node.name, "' (", node.op, "): ", what));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExecutionPlan>> ExecutionPlan::Create(graph::Graph graph_in,
                                                                     std::shared_ptr<const Backend> backend,
                                                                     const std::vector<TaskKernelChoice>& choices) {
  std::unique_ptr<ExecutionPlan> plan(new ExecutionPlan());
  plan->graph_ = std::move(graph_in);
  plan->backend_ = std::move(backend);
  const graph::Graph& g = plan->graph_;

  std::map<std::string, Storage> where;
  std::vector<BufferLifetime> lifetimes;
  auto new_buffer = [&](const graph::Tensor& t, int first) {
    lifetimes.push_back({t.name, std::max<int64_t>(1, t.NumElements() * graph::DTypeSize(t.dtype)), first, first});
    return static_cast<int>(lifetimes.size()) - 1;
  };
  // The arena must fit this machine, as measure::CheckBuffersFit asks of a workload's buffers:
  // half of its memory. One tensor over that is refused before any kernel is made (kernels
  // size their tables by their tensors), the whole arena once it is planned. Byte sizes are
  // element counts times at most 8: a tensor must leave room for that (the importer keeps
  // every tensor within 2^40 elements; a graph made otherwise may not).
  const int64_t host = measure::HostMemoryBytes();
  const int64_t allowed = host > 0 ? host / 2 : std::numeric_limits<int64_t>::max() / 4;
  const std::string limit = host > 0 ? absl::StrCat("this machine allows ", measure::FormatBytes(allowed),
                                                    " (half of its ", measure::FormatBytes(host), " memory)")
                                     : "more than int64 bytes";
  for (const auto& [name, t] : g.tensors) {
    for (int64_t e : t.shape) {
      if (e < 0) return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has a negative extent"));
    }
    if (t.NumElements() > (int64_t{1} << 56)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has more than 2^56 elements"));
    }
    const int64_t bytes = t.NumElements() * graph::DTypeSize(t.dtype);
    if (!t.constant() && bytes > allowed) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' (", graph::DTypeName(t.dtype), " ",
                                                     absl::StrJoin(t.shape, "x"), ") needs ",
                                                     measure::FormatBytes(bytes), "; ", limit));
    }
  }
  for (const auto& [name, t] : g.tensors) {
    if (t.constant()) {
      if (static_cast<int64_t>(t.data->size()) != t.NumElements() * graph::DTypeSize(t.dtype)) {
        return absl::InvalidArgumentError(absl::StrCat("constant '", name, "' holds ", t.data->size(), " bytes, not ",
                                                       t.NumElements() * graph::DTypeSize(t.dtype)));
      }
      where[name] = Storage{-1, t.data->data()};
    }
  }
  for (const std::string& name : g.inputs) {
    const graph::Tensor* t = g.Find(name);
    if (t == nullptr) return absl::InvalidArgumentError("graph input '" + name + "' has no tensor");
    if (t->constant()) continue;  // an initializer listed as an input
    where[name] = Storage{new_buffer(*t, 0), nullptr};
    plan->inputs_.push_back({name, t->dtype, t->shape});
  }

  // Steps, with the tensor names their pointers are bound from once the arena is placed.
  struct Pending {
    std::vector<std::string> in, out;
    const TaskKernelChoice* choice = nullptr;
    StepInfo info;
  };
  std::vector<Pending> pending;
  std::map<std::string, const TaskKernelChoice*> choice_of;
  for (const TaskKernelChoice& c : choices) choice_of[c.workload.Key()] = &c;
  std::set<const graph::Tensor*> constants_read;

  auto use = [&](const graph::Node& node, const std::string& name, int step) -> absl::Status {
    auto it = where.find(name);
    if (it == where.end()) return NodeError(node, "reads '" + name + "' before anything computes it");
    if (it->second.buffer >= 0) {
      BufferLifetime& b = lifetimes[it->second.buffer];
      b.last = std::max(b.last, step);
    } else if (const graph::Tensor* t = g.Find(name)) {
      constants_read.insert(t);
    }
    return absl::OkStatus();
  };

  for (const graph::Node& node : g.nodes) {
    bool folded = !node.outputs.empty();
    for (const std::string& o : node.outputs) {
      const graph::Tensor* t = g.Find(o);
      folded &= o.empty() || (t != nullptr && t->constant());
    }
    if (folded) continue;
    for (const std::string& o : node.outputs) {
      if (!o.empty() && g.Find(o) == nullptr) return NodeError(node, "output '" + o + "' has no tensor");
      if (!o.empty() && where.count(o)) return NodeError(node, "output '" + o + "' is computed twice");
    }
    const int step = static_cast<int>(pending.size());
    if (!node.task.has_value() && IsViewOp(node.op)) {
      if (node.inputs.empty() || node.inputs[0].empty() || node.outputs.empty() || node.outputs[0].empty()) {
        return NodeError(node, "a view needs an input and an output");
      }
      for (size_t i = 1; i < node.outputs.size(); ++i) {
        if (!node.outputs[i].empty()) return NodeError(node, "only the first output is supported");
      }
      auto it = where.find(node.inputs[0]);
      if (it == where.end()) return NodeError(node, "reads '" + node.inputs[0] + "' before anything computes it");
      const graph::Tensor* in = g.Find(node.inputs[0]);
      const graph::Tensor* out = g.Find(node.outputs[0]);
      if (in == nullptr || in->dtype != out->dtype || in->NumElements() != out->NumElements()) {
        return NodeError(node, "the output does not hold the input's elements");
      }
      where[node.outputs[0]] = it->second;  // shares the buffer; uses of the view extend its life
      ++plan->memory_.views;
      continue;
    }
    Pending p;
    p.info.node = node.name;
    p.info.op = node.op;
    if (node.task.has_value()) {
      const graph::TaskBinding& task = *node.task;
      auto c = choice_of.find(task.workload.Key());
      if (c == choice_of.end()) return NodeError(node, "no kernel was chosen for workload " + task.workload.Key());
      std::vector<codegen::TensorSpec> specs = task.workload.Inputs();
      specs.push_back(task.workload.Output());
      if (task.args.size() != specs.size()) {
        return NodeError(node, absl::StrCat("binds ", task.args.size(), " tensors; the kernel takes ", specs.size()));
      }
      for (size_t i = 0; i < specs.size(); ++i) {
        const graph::Tensor* t = g.Find(task.args[i]);
        if (t == nullptr || t->dtype != graph::DType::kFloat32 || t->NumElements() != specs[i].NumElements()) {
          return NodeError(node, absl::StrCat("tensor '", task.args[i], "' does not hold the kernel's ", specs[i].name));
        }
      }
      p.in.assign(task.args.begin(), task.args.end() - 1);
      p.out = {task.args.back()};
      p.choice = c->second;
      // A tuned step's op is its workload's kind (convolutions split as depthwise, 1x1, other).
      const codegen::Workload& w = task.workload;
      p.info.op = codegen::OpName(w.op);
      if (w.op == codegen::OpKind::kConv2d) {
        p.info.op += w.depthwise() ? " dw" : w.kernel_h == 1 && w.kernel_w == 1 ? " 1x1" : "";
      }
      p.info.workload = w.Label();
    } else {
      std::vector<const graph::Tensor*> ins, outs;
      for (const std::string& name : node.inputs) {
        const graph::Tensor* t = name.empty() ? nullptr : g.Find(name);
        if (!name.empty() && t == nullptr) return NodeError(node, "input '" + name + "' has no tensor");
        ins.push_back(t);
      }
      for (const std::string& name : node.outputs) outs.push_back(name.empty() ? nullptr : g.Find(name));
      auto kernel = plan->backend_->CreateOpKernel(node, ins, outs, g.opset);
      if (!kernel.ok()) return kernel.status();
      plan->op_kernels_.push_back(*std::move(kernel));
      p.in = node.inputs;
      p.out = node.outputs;
    }
    for (const std::string& name : p.in) {
      if (name.empty()) continue;
      if (absl::Status st = use(node, name, step); !st.ok()) return st;
    }
    for (const std::string& name : p.out) {
      if (!name.empty()) where[name] = Storage{new_buffer(*g.Find(name), step), nullptr};
    }
    pending.push_back(std::move(p));
  }
  const int end = static_cast<int>(pending.size());
  for (const std::string& name : g.outputs) {
    auto it = where.find(name);
    const graph::Tensor* t = g.Find(name);
    if (it == where.end() || t == nullptr) return absl::InvalidArgumentError("graph output '" + name + "' is never computed");
    if (it->second.buffer >= 0) lifetimes[it->second.buffer].last = end;
    plan->outputs_.push_back({name, t->dtype, t->shape});
  }
  for (const graph::Tensor* t : constants_read) plan->memory_.constant_bytes += static_cast<int64_t>(t->data->size());

  // The whole arena, before any tuned kernel is compiled or any memory is taken.
  MemoryPlan mp;
  {
    __int128 total = 0;
    for (const BufferLifetime& b : lifetimes) total += AlignArena(b.bytes);
    if (total > static_cast<__int128>(std::numeric_limits<int64_t>::max() / 4)) {
      return absl::InvalidArgumentError("the model's tensors need more than 2^61 bytes; " + limit);
    }
    mp = PlanMemory(lifetimes);
    if (mp.arena_bytes > allowed) {
      return absl::InvalidArgumentError(absl::StrCat("the model's tensors need ", measure::FormatBytes(mp.arena_bytes),
                                                     " of memory at once; ", limit));
    }
  }

  // Tuned kernels: one per distinct (workload, config, weight kind), compiled on up to all cores.
  // A schedule that packs its weight once (knob prepack) may keep the pack only where the
  // weight is a constant of the model; where it is computed (a Gemm's B from another node), the
  // kernel is built with prepack 0 and packs it on every call.
  auto computed_weight = [&](const Pending& p) {
    const graph::Tensor* t = p.in.size() < 2 ? nullptr : g.Find(p.in[1]);
    return t == nullptr || !t->constant();
  };
  auto kernel_key = [&](const Pending& p) {
    return std::make_tuple(p.choice->workload.Key(), p.choice->config_json, computed_weight(p));
  };
  std::map<std::tuple<std::string, std::string, bool>, int> kernel_of;
  std::vector<const TaskKernelChoice*> to_load;
  std::vector<bool> packed_per_call;
  for (const Pending& p : pending) {
    if (p.choice == nullptr) continue;
    if (kernel_of.emplace(kernel_key(p), static_cast<int>(to_load.size())).second) {
      to_load.push_back(p.choice);
      packed_per_call.push_back(computed_weight(p));
    }
  }
  std::vector<absl::StatusOr<std::unique_ptr<TaskKernel>>> loaded;
  for (size_t i = 0; i < to_load.size(); ++i) loaded.emplace_back(absl::UnknownError("not loaded"));
  {
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i = next++; i < to_load.size(); i = next++) {
        const TaskKernelChoice& c = *to_load[i];
        auto tmpl = plan->backend_->MakeTemplate(c.workload);
        if (!tmpl.ok()) {
          loaded[i] = tmpl.status();
          continue;
        }
        auto config = (*tmpl)->space().FromJson(c.config_json);
        if (!config.ok()) {
          loaded[i] = config.status();
          continue;
        }
        const std::vector<search::Knob>& knobs = (*tmpl)->space().knobs();
        for (size_t k = 0; k < knobs.size() && packed_per_call[i]; ++k) {
          if (knobs[k].name == "prepack") (*config)[k] = 0;  // option 0: packed in every call
        }
        loaded[i] = plan->backend_->LoadTaskKernel(**tmpl, *config);
      }
    };
    const size_t workers = std::min<size_t>(to_load.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> threads;
    for (size_t i = 1; i < workers; ++i) threads.emplace_back(work);
    work();
    for (auto& t : threads) t.join();
  }
  for (size_t i = 0; i < loaded.size(); ++i) {
    if (!loaded[i].ok()) {
      return absl::Status(loaded[i].status().code(),
                          absl::StrCat("node '", to_load[i]->node, "': ", loaded[i].status().message()));
    }
    plan->task_kernels_.push_back(*std::move(loaded[i]));
  }

  // Memory: allocate the arena (placed above), bind every pointer.
  plan->memory_.arena_bytes = mp.arena_bytes;
  plan->memory_.tensor_bytes = mp.total_bytes;
  auto arena = plan->backend_->Allocate(mp.arena_bytes);
  if (!arena.ok()) return arena.status();
  plan->arena_ = *std::move(arena);
  char* base = static_cast<char*>(plan->arena_.get());
  for (size_t i = 0; i < lifetimes.size(); ++i) {
    plan->buffers_.push_back({lifetimes[i].name, mp.offsets[i], lifetimes[i].bytes, lifetimes[i].first, lifetimes[i].last});
  }
  // On a device, every constant a kernel reads is uploaded once.
  std::map<const void*, void*> device_constant;
  if (!plan->backend_->HostMemory()) {
    for (const graph::Tensor* t : constants_read) {
      const int64_t bytes = static_cast<int64_t>(t->data->size());
      auto copy = plan->backend_->Allocate(bytes);
      if (!copy.ok()) return copy.status();
      plan->backend_->CopyToDevice(copy->get(), t->data->data(), bytes);
      plan->aligned_constants_.push_back(*copy);
      device_constant[t->data->data()] = copy->get();
    }
  }
  auto pointer = [&](const std::string& name) -> void* {
    if (name.empty()) return nullptr;
    const Storage& s = where.at(name);
    if (s.buffer >= 0) return base + mp.offsets[s.buffer];
    if (auto it = device_constant.find(s.constant); it != device_constant.end()) return it->second;
    return const_cast<void*>(s.constant);
  };
  std::map<const void*, void*> aligned;  // constants a tuned kernel reads, copied when misaligned
  auto aligned_pointer = [&](const std::string& name) -> absl::StatusOr<void*> {
    void* p = pointer(name);
    if (reinterpret_cast<uintptr_t>(p) % kArenaAlignment == 0) return p;
    if (auto it = aligned.find(p); it != aligned.end()) return it->second;
    const graph::Tensor* t = g.Find(name);
    auto copy = plan->backend_->Allocate(static_cast<int64_t>(t->data->size()));
    if (!copy.ok()) return copy.status();
    plan->backend_->CopyToDevice(copy->get(), p, static_cast<int64_t>(t->data->size()));
    plan->aligned_constants_.push_back(*copy);
    aligned[p] = copy->get();
    return copy->get();
  };
  size_t op_index = 0;
  for (const Pending& p : pending) {
    Step s;
    s.info = p.info;
    if (p.choice != nullptr) {
      s.task = plan->task_kernels_[kernel_of.at(kernel_key(p))].get();
      for (const std::string& name : p.in) {
        auto ptr = aligned_pointer(name);
        if (!ptr.ok()) return ptr.status();
        s.args.push_back(static_cast<float*>(*ptr));
      }
      s.args.push_back(static_cast<float*>(pointer(p.out[0])));
    } else {
      s.op = plan->op_kernels_[op_index++].get();
      for (const std::string& name : p.in) s.in.push_back(pointer(name));
      for (const std::string& name : p.out) s.out.push_back(pointer(name));
    }
    plan->steps_.push_back(std::move(s));
  }
  for (const TensorDesc& d : plan->inputs_) plan->input_ptrs_.push_back(pointer(d.name));
  for (const TensorDesc& d : plan->outputs_) plan->output_ptrs_.push_back(pointer(d.name));
  if (absl::Status st = plan->backend_->Prepare(); !st.ok()) return st;
  if (absl::Status st = plan->backend_->Synchronize(); !st.ok()) return st;
  // The plan's weights may sit where an earlier plan's weights were, which CPU kernels with
  // weights packed once (keyed by kernel and weight address) may have packed: forget those
  // packings. A plan still alive packs its weights again on its next run.
  tune_rt_prepacked_reset();
  return plan;
}

absl::Status ExecutionPlan::Run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) {
  return RunSteps(inputs, outputs, nullptr);
}

absl::Status ExecutionPlan::RunProfiled(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                                        std::vector<double>* step_seconds) {
  step_seconds->assign(steps_.size(), 0.0);
  return RunSteps(inputs, outputs, step_seconds);
}

const StepInfo& ExecutionPlan::step_info(int step) const { return steps_.at(static_cast<size_t>(step)).info; }

absl::Status ExecutionPlan::RunSteps(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                                     std::vector<double>* step_seconds) {
  if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the plan takes ", inputs_.size(), " inputs and ", outputs_.size(),
                                                   " outputs; given ", inputs.size(), " and ", outputs.size()));
  }
  for (const void* p : inputs) {
    if (p == nullptr) return absl::InvalidArgumentError("a null input");
  }
  for (const void* p : outputs) {
    if (p == nullptr) return absl::InvalidArgumentError("a null output");
  }
  for (size_t i = 0; i < inputs.size(); ++i) backend_->CopyToDevice(input_ptrs_[i], inputs[i], inputs_[i].Bytes());
  using Clock = std::chrono::steady_clock;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    const Clock::time_point t0 = step_seconds != nullptr ? Clock::now() : Clock::time_point();
    if (s.task != nullptr) {
      s.task->Run(s.args.data());
    } else {
      s.op->Run(s.in.data(), s.out.data());
    }
    if (step_seconds != nullptr) {
      // A device backend runs asynchronously: each step is waited for, so its time is its own.
      if (absl::Status st = backend_->Synchronize(); !st.ok()) return st;
      (*step_seconds)[i] = std::chrono::duration<double>(Clock::now() - t0).count();
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) backend_->CopyToHost(outputs[i], output_ptrs_[i], outputs_[i].Bytes());
  return backend_->Synchronize();
}

}  // namespace tune::executor
