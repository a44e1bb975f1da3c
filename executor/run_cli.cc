// `tune run`: imports an ONNX model, builds its plan with the tuned kernels of the record
// database, runs it on seeded random inputs, and compares with onnxruntime when asked.
#include "executor/run_cli.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/exit_code.h"
#include "base/table.h"
#include "dataset/record_database.h"
#include "executor/backend.h"
#include "executor/execution_plan.h"
#include "executor/npy_file.h"
#include "executor/task_kernels.h"
#include "graph/layout.h"
#include "graph/onnx_import.h"
#include "measure/target.h"
#include "ort_check_script.h"
#include "spdlog/spdlog.h"
#include "tuner/model_file.h"
#include "tuner/parse_command_line.h"
#include "tuner/tuning_flags.h"

namespace tune::executor {
namespace {

constexpr char kWho[] = "tune run";

struct RunFlags {
  std::string model;
  std::string db_path;
  std::string target = "llvm";
  std::vector<std::string> inputs;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  uint64_t seed = 1;
  std::string save_dir;
  int bench = 0;
  bool profile = false;
  std::string ort_python;
  std::string layout = "nchw";
};

/// Uniform double in [0, 1) from 53 bits of the generator (the same on every library).
double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/// Seeded graph inputs: floats uniform in [-1, 1); int64 indices of a Gather uniform in
/// [0, the gathered axis's extent), other int64 inputs in [0, 2); bools 0 or 1.
std::vector<std::vector<uint8_t>> DrawInputs(const ExecutionPlan& plan, uint64_t seed) {
  const graph::Graph& g = plan.graph();
  std::vector<std::vector<uint8_t>> data;
  std::mt19937_64 rng(seed);
  for (const TensorDesc& d : plan.inputs()) {
    std::vector<uint8_t> bytes(static_cast<size_t>(d.Bytes()));
    const int64_t n = d.NumElements();
    if (d.dtype == graph::DType::kFloat32) {
      float* p = reinterpret_cast<float*>(bytes.data());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(2.0 * Uniform(rng) - 1.0);
    } else if (d.dtype == graph::DType::kInt64) {
      int64_t bound = 2;
      for (const graph::Node& node : g.nodes) {
        if (node.op != "Gather" || node.inputs.size() < 2 || node.inputs[1] != d.name) continue;
        const graph::Tensor* table = g.Find(node.inputs[0]);
        if (table == nullptr || table->shape.empty()) continue;
        int64_t axis = 0;
        if (auto it = node.attributes.find("axis"); it != node.attributes.end()) {
          if (auto* v = std::get_if<int64_t>(&it->second)) axis = *v;
        }
        if (axis < 0) axis += static_cast<int64_t>(table->shape.size());
        if (axis >= 0 && axis < static_cast<int64_t>(table->shape.size())) {
          bound = std::max<int64_t>(1, table->shape[axis]);
          break;
        }
      }
      int64_t* p = reinterpret_cast<int64_t*>(bytes.data());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(Uniform(rng) * static_cast<double>(bound));
    } else {
      for (int64_t i = 0; i < n; ++i) bytes[i] = Uniform(rng) < 0.5 ? 0 : 1;
    }
    data.push_back(std::move(bytes));
  }
  return data;
}

std::string ShapeText(const std::vector<int64_t>& shape) { return "[" + absl::StrJoin(shape, "x") + "]"; }

/// Sum and sum of absolute values of a tensor's elements (as doubles).
std::string Checksum(const TensorDesc& d, const std::vector<uint8_t>& bytes) {
  double sum = 0, abs_sum = 0;
  for (int64_t i = 0; i < d.NumElements(); ++i) {
    double v = 0;
    if (d.dtype == graph::DType::kFloat32) v = reinterpret_cast<const float*>(bytes.data())[i];
    else if (d.dtype == graph::DType::kInt64) v = static_cast<double>(reinterpret_cast<const int64_t*>(bytes.data())[i]);
    else v = bytes[i];
    sum += v;
    abs_sum += std::fabs(v);
  }
  char buf[96];
  std::snprintf(buf, sizeof(buf), "sum %.6g, abs sum %.6g", sum, abs_sum);
  return buf;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Runs `argv` (argv[0] found on PATH when it has no '/'), stdout captured into `*out`,
/// stderr passed through; the exit code, or -1 when it could not start or was killed.
int RunCaptured(const std::vector<std::string>& argv, std::string* out) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    if (dup2(fds[1], 1) < 0) _exit(126);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return -1;
  }
  char buf[4096];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof(buf))) != 0) {
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out->append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// The .npy files of every graph input and output.
std::vector<std::pair<std::string, std::string>> NpyFiles(const ExecutionPlan& plan,
                                                          const std::vector<std::vector<uint8_t>>& inputs,
                                                          const std::vector<std::vector<uint8_t>>& outputs) {
  std::vector<std::pair<std::string, std::string>> files;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorDesc& d = plan.inputs()[i];
    files.push_back({SanitizeFileName(d.name) + ".npy", NpyBytes(d.dtype, d.shape, inputs[i].data())});
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorDesc& d = plan.outputs()[i];
    files.push_back({SanitizeFileName(d.name) + ".npy", NpyBytes(d.dtype, d.shape, outputs[i].data())});
  }
  return files;
}

/// --profile: `runs` more runs with every step timed, then one row per step, slowest first:
/// its median time and share of the steps' summed medians; then the medians summed per op.
absl::Status PrintProfile(ExecutionPlan& p, const std::vector<const void*>& in_ptrs, const std::vector<void*>& out_ptrs,
                          int runs) {
  const int steps = p.steps();
  std::vector<std::vector<double>> samples(static_cast<size_t>(steps));
  std::vector<double> seconds;
  for (int r = 0; r < runs; ++r) {
    if (absl::Status st = p.RunProfiled(in_ptrs, out_ptrs, &seconds); !st.ok()) return st;
    for (int i = 0; i < steps; ++i) samples[i].push_back(seconds[i]);
  }
  std::vector<double> median(static_cast<size_t>(steps));
  double total = 0;
  for (int i = 0; i < steps; ++i) total += median[i] = Median(samples[i]);
  std::vector<int> order(static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return median[a] > median[b]; });
  std::vector<std::vector<std::string>> rows;
  for (int i : order) {
    const StepInfo& s = p.step_info(i);
    rows.push_back({std::to_string(i), s.node, s.op, s.workload.empty() ? "(built-in)" : s.workload,
                    absl::StrFormat("%.1f", median[i] * 1e6), absl::StrFormat("%.1f", total > 0 ? 100 * median[i] / total : 0.0)});
  }
  std::printf("profile: median per step over %d timed runs (each step's own wall time), slowest first\n", runs);
  base::PrintTable({"step", "node", "op", "workload", "median us", "%"}, rows);
  std::map<std::string, std::pair<int, double>> by_op;
  for (int i = 0; i < steps; ++i) {
    auto& [count, sum] = by_op[p.step_info(i).op];
    ++count;
    sum += median[i];
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> ops(by_op.begin(), by_op.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  rows.clear();
  for (const auto& [op, cs] : ops) {
    rows.push_back({op, std::to_string(cs.first), absl::StrFormat("%.1f", cs.second * 1e6),
                    absl::StrFormat("%.1f", total > 0 ? 100 * cs.second / total : 0.0)});
  }
  base::PrintTable({"op", "steps", "median us (sum)", "%"}, rows);
  std::printf("profile: the steps' medians sum to %.4f ms\n", total * 1e3);
  return absl::OkStatus();
}

int Run(const RunFlags& f) {
  // Everything that can be refused is checked before anything runs or is written.
  const bool on_gpu = f.target.rfind("cuda", 0) == 0;
  if (f.profile && f.bench <= 0) {
    return base::Fail(kWho, absl::InvalidArgumentError("--profile needs --bench N (it times N more runs step by step)"));
  }
  const absl::StatusOr<int64_t> layout_block = tuner::LayoutBlock(f.layout, f.target);
  if (!layout_block.ok()) return base::Fail(kWho, layout_block.status());
  auto backend = CreateBackend(f.target, f.threads);
  if (!backend.ok()) return base::Fail(kWho, backend.status());
  graph::ImportOptions options;
  for (const std::string& text : f.inputs) {
    if (absl::Status st = graph::ParseInputShape(text, &options); !st.ok()) return base::Fail(kWho, st);
  }
  auto g = graph::ImportOnnx(f.model, options);
  if (!g.ok()) return base::Fail(kWho, g.status());
  if (*layout_block > 0) {
    if (absl::Status st = graph::PlanBlockedLayout(*g, *layout_block); !st.ok()) return base::Fail(kWho, st);
  }
  std::unique_ptr<dataset::RecordDatabase> db;
  if (!f.db_path.empty()) {
    struct stat st;
    if (stat(f.db_path.c_str(), &st) != 0) {
      return base::Fail(kWho, absl::NotFoundError("record database " + f.db_path + " does not exist"));
    }
    auto opened = dataset::RecordDatabase::Open(f.db_path, /*create=*/false);
    if (!opened.ok()) return base::Fail(kWho, opened.status());
    db = *std::move(opened);
  }
  std::shared_ptr<const Backend> shared_backend = *std::move(backend);
  auto choices = ChooseTaskKernels(*g, *shared_backend, db.get());
  if (!choices.ok()) return base::Fail(kWho, absl::Status(choices.status().code(), f.model + ": " + std::string(choices.status().message())));
  const std::string model_name = g->name;
  auto plan = ExecutionPlan::Create(*std::move(g), shared_backend, *choices);
  if (!plan.ok()) return base::Fail(kWho, absl::Status(plan.status().code(), f.model + ": " + std::string(plan.status().message())));
  ExecutionPlan& p = **plan;

  std::vector<std::vector<uint8_t>> inputs = DrawInputs(p, f.seed), outputs;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  for (const auto& d : inputs) in_ptrs.push_back(d.data());
  for (const TensorDesc& d : p.outputs()) {
    outputs.emplace_back(static_cast<size_t>(d.Bytes()));
    out_ptrs.push_back(outputs.back().data());
  }
  if (absl::Status st = p.Run(in_ptrs, out_ptrs); !st.ok()) return base::Fail(kWho, st);

  // Where each task's kernel came from.
  std::vector<std::vector<std::string>> rows;
  int tuned = 0;
  for (const TaskKernelChoice& c : *choices) {
    char source[128];
    if (c.tuned) {
      std::snprintf(source, sizeof(source), "tuned (record %lld, %.4f ms measured)", static_cast<long long>(c.record_id),
                    c.measured_s * 1e3);
      ++tuned;
    } else {
      std::snprintf(source, sizeof(source), "default schedule%s", c.note.empty() ? "" : " (record passed over)");
    }
    rows.push_back({c.node, c.workload.Label(), std::to_string(c.count), source});
  }
  std::printf("tune run: %s on %s (%s), %d threads\n", base::EscapeControl(f.model).c_str(),
              shared_backend->target().device_model.c_str(), shared_backend->target().Key().c_str(), f.threads);
  base::PrintTable({"node", "workload", "count", "kernel"}, rows);
  const int total = static_cast<int>(choices->size());
  std::printf("%d of %d tasks tuned; %d ran the default schedule%s\n", tuned, total, total - tuned,
              db ? "" : " (no --db: no records, every task runs its default schedule)");
  if (*layout_block > 0) {
    int convs = 0, blocked = 0, to_blocked = 0, to_nchw = 0, reblocks = 0;
    std::map<int64_t, int, std::greater<>> by_block;  // channel block -> blocked convolutions
    for (const graph::Node& node : p.graph().nodes) {
      if (node.task && node.task->workload.op == codegen::OpKind::kConv2d) {
        ++convs;
        blocked += node.task->workload.layout_block > 0;
        if (node.task->workload.layout_block > 0) ++by_block[node.task->workload.layout_block];
      }
      to_blocked += node.op == graph::kToBlockedOp;
      to_nchw += node.op == graph::kToNchwOp;
      reblocks += node.op == graph::kReblockOp;
    }
    std::string blocks;
    for (const auto& [block, n] : by_block) {
      absl::StrAppend(&blocks, blocks.empty() ? "; in blocks of " : ", of ", block, ": ", n);
    }
    std::printf("layout nchwc (%lld vector lanes): %d of %d convolutions blocked; %d to-blocked, %d to-NCHW and %d "
                "re-blocking copies%s\n",
                static_cast<long long>(*layout_block), blocked, convs, to_blocked, to_nchw, reblocks, blocks.c_str());
  }
  for (const TaskKernelChoice& c : *choices) {
    if (!c.note.empty()) std::printf("note: %s: %s\n", c.node.c_str(), base::EscapeControl(c.note).c_str());
  }
  const MemoryStats& m = p.memory();
  std::printf("memory: arena %s (the tensors' sum without reuse: %s; %d views share their input's buffer); constants %s\n",
              measure::FormatBytes(m.arena_bytes).c_str(), measure::FormatBytes(m.tensor_bytes).c_str(), m.views,
              measure::FormatBytes(m.constant_bytes).c_str());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorDesc& d = p.outputs()[i];
    std::printf("output %s: %s %s, %s\n", base::EscapeControl(d.name).c_str(), graph::DTypeName(d.dtype),
                ShapeText(d.shape).c_str(), Checksum(d, outputs[i]).c_str());
  }
  std::fflush(stdout);

  if (!f.save_dir.empty()) {
    if (absl::Status st = WriteFilesAtomically(f.save_dir, NpyFiles(p, inputs, outputs)); !st.ok()) return base::Fail(kWho, st);
    std::printf("saved %zu inputs and %zu outputs as .npy in %s\n", inputs.size(), outputs.size(),
                base::EscapeControl(f.save_dir).c_str());
  }

  double tune_median_ms = 0;
  if (f.bench > 0) {
    for (int i = 0; i < 3; ++i) (void)p.Run(in_ptrs, out_ptrs);
    std::vector<double> ms;
    for (int i = 0; i < f.bench; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      (void)p.Run(in_ptrs, out_ptrs);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    tune_median_ms = Median(ms);
    const std::string where = on_gpu ? "on " + f.target + ", host copies of inputs and outputs included"
                                     : absl::StrCat(f.threads, " threads");
    std::printf("tune: median %.4f ms, min %.4f ms over %d runs (%s)\n", tune_median_ms,
                *std::min_element(ms.begin(), ms.end()), f.bench, where.c_str());
    if (f.profile) {
      if (absl::Status st = PrintProfile(p, in_ptrs, out_ptrs, f.bench); !st.ok()) return base::Fail(kWho, st);
    }
  }

  // onnxruntime: with --bench or --ort-python.
  std::string python = f.ort_python;
  if (python.empty() && f.bench > 0) {
    if (const char* env = std::getenv("TUNE_ORT_PYTHON")) python = env;
  }
  if (python.empty()) {
    if (f.bench > 0) std::printf("onnxruntime: not compared (no --ort-python and no $TUNE_ORT_PYTHON)\n");
    return 0;
  }
  std::string dir = f.save_dir;
  std::string temp_dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/tune-run-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return base::Fail(kWho, base::kExitFailure, "cannot create a temporary directory");
    temp_dir = dir = tmpl;
    if (absl::Status st = WriteFilesAtomically(dir, NpyFiles(p, inputs, outputs)); !st.ok()) {
      std::filesystem::remove_all(temp_dir);
      return base::Fail(kWho, st);
    }
  }
  std::vector<std::string> argv = {python, "-c", kOrtCheckScript, f.model, dir, "--threads", std::to_string(f.threads)};
  // onnxruntime runs on this CPU: beside a GPU run it checks the outputs only (the GPU's peer
  // is PyTorch, scripts/bench/torch_e2e.py).
  if (f.bench > 0 && !on_gpu) {
    argv.push_back("--bench");
    argv.push_back(std::to_string(f.bench));
  }
  std::string out;
  const int code = RunCaptured(argv, &out);
  if (!temp_dir.empty()) std::filesystem::remove_all(temp_dir);
  double ort_ms = 0;
  for (size_t pos = 0; pos < out.size();) {
    size_t end = out.find('\n', pos);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("ort_median_ms=", 0) == 0) {
      ort_ms = std::strtod(line.c_str() + 14, nullptr);
    } else if (!line.empty()) {
      std::printf("onnxruntime %s\n", base::EscapeControl(line).c_str());
    }
  }
  if (code == 1) return base::Fail(kWho, base::kExitFailure, "the outputs differ from onnxruntime's (see above)");
  if (code != 0) {
    return base::Fail(kWho, base::kExitFailure,
                      absl::StrCat("the onnxruntime check (", python, ") failed with exit code ", code));
  }
  if (f.bench > 0 && ort_ms > 0) {
    std::printf("tune %.2f ms, onnxruntime %.2f ms (same %d thread%s): %.2fx\n", tune_median_ms, ort_ms, f.threads,
                f.threads == 1 ? "" : "s", ort_ms / tune_median_ms);
  }
  return 0;
}

}  // namespace

int RunCommand(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{"tune run: run an ONNX model with its tuned kernels on seeded random inputs.\n"
               "usage: tune run MODEL.onnx [--db FILE] [--target llvm|cuda[:N]] [--input NAME=1x3x224x224 ...] [--threads T]\n"
               "       [--seed S] [--save DIR] [--bench N [--profile]] [--ort-python PATH] [--layout nchw|nchwc]",
               "tune run"};
  RunFlags f;
  app.add_option("model", f.model, "the ONNX model file")->required();
  app.add_option("--db", f.db_path, "record database (tuned kernels); without it every task runs its default schedule");
  app.add_option("--target", f.target, "where the model runs: llvm (this CPU) or cuda[:N] (NVIDIA GPU N)");
  app.add_option("--input", f.inputs, "an input's shape, NAME=1x3x224x224 (repeatable; fixes symbolic dimensions)");
  app.add_option("--threads", f.threads, "threads the kernels use (default: all cores; records are looked up for it)")
      ->check(CLI::Range(1, 256));
  app.add_option("--seed", f.seed, "seed of the random inputs");
  app.add_option("--save", f.save_dir, "write every graph input and output as DIR/<name>.npy");
  app.add_option("--bench", f.bench, "time N runs after warm-up (median, min) and compare with onnxruntime")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("--profile", f.profile,
               "with --bench: time every step of N more runs and print each node's median, slowest first, and the "
               "medians summed per op");
  app.add_option("--ort-python", f.ort_python,
                 "a python with onnxruntime: check the outputs against it (default with --bench: $TUNE_ORT_PYTHON)");
  tuner::AddLayoutFlag(app, f.layout,
                       "convolutions keep their activations in channel blocks of the vector width, with layout "
                       "copies only where the layout changes");
  if (auto code = tuner::ParseCommandLine(app, argc - 1, argv + 1)) return *code;
  return Run(f);
}

}  // namespace tune::executor
