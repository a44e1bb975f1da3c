// cpu_vendor_bench: tuned kernels against OpenBLAS SGEMM and oneDNN convolution on this CPU.
//
// For each workload: tune it (the chosen search strategy, records in a database, resumable), rebuild the
// best config, check it against the naive reference and time it in this process; then time
// the vendor library on the same inputs with the same rule (`repeats` samples of back-to-back
// calls lasting >= min-sample-ms each, each after a warm-up of that kernel, the kernels'
// samples interleaved, median per-call time). One table out, with per-workload notes
// (configs, implementations).
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/table.h"
#include "cblas.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/ir/kernel.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "codegen/ir/template.h"
#include "codegen/templates.h"
#include "codegen/ir/workload.h"
#include "dataset/record_database.h"
#include "dnnl.hpp"
#include "measure/host_builder.h"
#include "measure/local_runner.h"
#include "measure/reference.h"
#include "measure/runner.h"
#include "measure/target.h"
#include "tuner/tuner.h"

namespace {

using namespace tune;
using Clock = std::chrono::steady_clock;
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------------------
// Options and workloads.

struct Options {
  int trials = 64;
  int threads = 1;
  int repeats = 7;
  uint64_t seed = 0;
  double min_sample_ms = 50.0;
  double warmup_ms = 100.0;
  double timeout_s = 10.0;
  std::string db_path = "cpu_vendor_bench.db";
  std::vector<std::string> only;         // workload ids to run; empty = all
  std::vector<std::string> config_json;  // "ID=JSON": extra hand-picked rows
  int finalists = 1;                     // search records re-measured here to pick the tuned config
  bool interleave = false;               // the search's batches timed side by side (MeasureProtocol::interleave)
  std::string strategy = "auto";         // the search strategy (tune's default unless told)
  std::string dump_dir;                  // where tune's timed kernels' object files go; empty: nowhere
};

struct Bench {
  std::string id;     // short name used by --only / --config-json
  std::string label;  // table label
  codegen::Workload workload;
};

std::vector<Bench> Workloads() {
  auto parse = [](codegen::OpKind op, const std::string& shape) {
    auto w = codegen::Workload::Parse(op, shape);
    if (!w.ok()) {
      std::fprintf(stderr, "bad workload %s: %s\n", shape.c_str(), w.status().ToString().c_str());
      std::exit(2);
    }
    return *w;
  };
  std::vector<Bench> list = {
      {"sgemm", "sgemm 1024x1024x1024", parse(codegen::OpKind::kMatmul, "1024,1024,1024")},
      {"conv1", "conv 64x56x56->64 k3 s1 p1", parse(codegen::OpKind::kConv2d, "1,64,56,56,64,3,3,1,1")},
      {"conv2", "conv 128x28x28->128 k3 s1 p1", parse(codegen::OpKind::kConv2d, "1,128,28,28,128,3,3,1,1")},
      {"conv3", "conv 512x7x7->512 k3 s1 p1", parse(codegen::OpKind::kConv2d, "1,512,7,7,512,3,3,1,1")},
      {"conv4", "conv 128x28x28->256 k1 s2 p0", parse(codegen::OpKind::kConv2d, "1,128,28,28,256,1,1,2,0")},
  };
  // conv1b..conv4b: the same convolutions with NCHWc activations, c = this CPU's vector lanes,
  // beside oneDNN reading and writing the same layout (its blocked weights packed once, as
  // tune's): the layout a model planned once keeps between its convolutions, no copies timed.
  const std::string layout = "nchw" + std::to_string(codegen::HostCpuLimits().vector_lanes) + "c";
  for (size_t i = 1; i <= 4; ++i) {
    Bench b = list[i];
    b.id += "b";
    b.label += " " + layout;
    b.workload.layout_block = codegen::HostCpuLimits().vector_lanes;
    list.push_back(b);
  }
  return list;
}

std::string WorkloadIds() {
  std::string ids;
  for (const Bench& b : Workloads()) ids += (ids.empty() ? "" : ", ") + b.id;
  return ids;
}

// ---------------------------------------------------------------------------------------
// Buffers and timing.

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Floats = std::unique_ptr<float[], FreeDeleter>;

Floats Allocate(size_t n) {
  size_t bytes = (std::max<size_t>(n, 16) * sizeof(float) + 63) / 64 * 64;
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (p == nullptr) {
    std::fprintf(stderr, "out of memory\n");
    std::abort();
  }
  return Floats(p);
}

Floats CopyOf(const std::vector<float>& v) {
  Floats f = Allocate(v.size());
  std::copy(v.begin(), v.end(), f.get());
  return f;
}

void FillNan(float* p, size_t n) { std::fill(p, p + n, std::numeric_limits<float>::quiet_NaN()); }

struct Timing {
  double median_s = kInf;
  int number = 0;                // calls per sample
  std::vector<double> samples;   // per-call seconds of each sample, in order
};

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// A kernel to time: a call, where its output lands, and whatever owns its buffers. After
/// Measure(), `ok` says it computed the reference result and `timing` holds its samples.
struct Kernel {
  std::string note;                       // implementation, config, or the failure message
  std::function<void()> run;              // one call
  std::function<const float*()> output;   // the output as nchw/row-major floats
  std::shared_ptr<void> state;            // keeps buffers, primitives, loaded code alive
  bool ok = false;
  std::string status = "-";               // "wrong", "failed", ... when not ok
  Timing timing;
};

/// Kernel that is not run, with a status and why.
Kernel Failed(std::string status, std::string why) {
  Kernel k;
  k.status = std::move(status);
  k.note = std::move(why);
  return k;
}

/// Checks the kernel's output against the reference; on a mismatch marks it wrong.
bool Check(Kernel* k, const measure::TaskData& data, const char* when) {
  measure::MeasureProtocol p;  // the tuner's tolerances
  std::string why;
  if (measure::AllClose(k->output(), data.reference.data(), static_cast<int64_t>(data.reference.size()), p.rtol,
                        p.atol, &why)) {
    return true;
  }
  k->ok = false;
  k->status = "wrong";
  k->note = std::string(when) + ": " + why + " [" + k->note + "]";
  return false;
}

/// Lets worker threads of whatever ran before go idle (OpenBLAS and OpenMP workers spin for
/// a while after a call), so that they do not compete with the next sample. Only where
/// kernels run on several threads: at one thread no worker runs, and the sleep itself costs
/// the next calls (below).
void Quiesce(const Options& o) {
  if (o.threads > 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

/// Back-to-back calls for >= warmup_s (at least `min_calls`); returns their count and
/// duration.
std::pair<int, double> WarmUp(Kernel* k, double warmup_s, int min_calls) {
  Clock::time_point t0 = Clock::now();
  int calls = 0;
  double elapsed = 0;
  while (calls < min_calls || elapsed < warmup_s) {
    k->run();
    ++calls;
    elapsed = Seconds(t0, Clock::now());
  }
  return {calls, elapsed};
}

/// The one timing rule for every kernel of a workload: each is checked against the
/// reference, warmed up with back-to-back calls for >= warmup_ms (at least two), and gets
/// `number` calls per sample, doubled from the warm-up estimate until one sample lasts
/// >= min_sample_ms. Then `repeats` rounds take one sample of each kernel in turn, so that
/// load from elsewhere on a shared machine hits all of them alike; median per-call time.
/// Each sample follows its own warm-up (>= warmup_ms of calls of that kernel), as the
/// tuner's records follow the calls before them: the first ~100 ms of calls after the thread
/// slept can be slower (on a 2-core EPYC VM, a 200 ms sleep right before each sample made
/// both SGEMM 1024s 1.5x slower, 31 ms against 21 ms; a 100 ms warm-up after the sleep, or
/// no sleep, gave 21 ms). Outputs are checked again after timing.
void Measure(const std::vector<Kernel*>& kernels, const measure::TaskData& data, const Options& o) {
  const double warmup_s = o.warmup_ms / 1e3, min_s = o.min_sample_ms / 1e3;
  auto sample = [](Kernel* k, int number) {
    Clock::time_point start = Clock::now();
    for (int i = 0; i < number; ++i) k->run();
    return Seconds(start, Clock::now());
  };
  std::vector<Kernel*> live;
  for (Kernel* k : kernels) {
    if (!k->run) continue;  // failed before it could run
    k->ok = true;
    k->status = "ok";
    k->run();
    if (!Check(k, data, "first call")) continue;
    Quiesce(o);
    auto [calls, elapsed] = WarmUp(k, warmup_s, 2);
    k->timing.number = std::max(1, static_cast<int>(std::ceil(min_s / (elapsed / calls))));
    while (sample(k, k->timing.number) < min_s) k->timing.number *= 2;
    live.push_back(k);
  }
  for (int r = 0; r < o.repeats; ++r) {
    for (Kernel* k : live) {
      Quiesce(o);
      WarmUp(k, warmup_s, 1);
      k->timing.samples.push_back(sample(k, k->timing.number) / k->timing.number);
    }
  }
  for (Kernel* k : live) {
    if (!Check(k, data, "after timing")) continue;
    std::vector<double> sorted = k->timing.samples;
    std::sort(sorted.begin(), sorted.end());
    size_t n = sorted.size();
    k->timing.median_s = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  }
}

// ---------------------------------------------------------------------------------------
// Thread control of the vendors.

/// oneDNN's CPU runtime as a word, and a setter for its thread count (OpenMP via the
/// omp_* entry points of the runtime oneDNN itself loaded, found with dlsym so that this
/// program binds to exactly that OpenMP library).
struct DnnlThreads {
  std::string runtime;
  int (*get_max)() = nullptr;
  void (*set)(int) = nullptr;
};

DnnlThreads FindDnnlThreads() {
  DnnlThreads t;
  const dnnl_version_t* v = dnnl_version();
  switch (v->cpu_runtime) {
    case DNNL_RUNTIME_OMP: t.runtime = "OpenMP"; break;
    case DNNL_RUNTIME_SEQ: t.runtime = "sequential"; break;
    case DNNL_RUNTIME_TBB: t.runtime = "TBB"; break;
    case DNNL_RUNTIME_THREADPOOL: t.runtime = "threadpool"; break;
    default: t.runtime = "unknown"; break;
  }
  t.set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  t.get_max = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return t;
}

// ---------------------------------------------------------------------------------------
// The three kinds of kernel.

/// tune's kernel for `config_json`: built, JIT-loaded into this process, on copies of the
/// task's inputs.
Kernel TuneKernel(const Bench& b, const std::string& config_json, const measure::TaskData& data,
                  const Options& o) {
  auto tmpl = codegen::CreateTemplate(b.workload);
  if (!tmpl.ok()) return Failed("failed", tmpl.status().ToString());
  auto config = (*tmpl)->space().FromJson(config_json);
  if (!config.ok()) return Failed("bad config", config.status().ToString());
  measure::HostBuilder builder;
  measure::BuildResult build = builder.Build(**tmpl, *config);
  if (build.status != measure::MeasureStatus::kOk) {
    return Failed(measure::StatusName(build.status), build.message);
  }
  auto loaded = codegen::LoadedKernel::Load(build.kernel);
  if (!loaded.ok()) return Failed("load failed", loaded.status().ToString());
  codegen::runtime::SetNumThreads(o.threads);
  std::string object_path;
  if (!o.dump_dir.empty()) {
    // ID-N.o, N counting this workload's kernels built so far (objdump -d reads them).
    static std::map<std::string, int> built;
    object_path = o.dump_dir + "/" + b.id + "-" + std::to_string(built[b.id]++) + ".o";
    std::ofstream(object_path, std::ios::binary) << build.kernel.object_code;
  }

  struct State {
    std::unique_ptr<codegen::LoadedKernel> code;
    std::vector<Floats> bufs;
    std::vector<float*> args;
  };
  auto st = std::make_shared<State>();
  st->code = std::move(*loaded);
  for (const auto& in : data.inputs) {
    st->bufs.push_back(CopyOf(in));
    st->args.push_back(st->bufs.back().get());
  }
  st->bufs.push_back(Allocate(data.reference.size()));
  float* out = st->bufs.back().get();
  FillNan(out, data.reference.size());
  st->args.push_back(out);

  Kernel k;
  k.note = config_json + (object_path.empty() ? "" : " (object " + object_path + ")");
  codegen::KernelFn fn = st->code->fn();
  float* const* argv = st->args.data();
  k.run = [fn, argv] { fn(argv); };
  k.output = [out] { return out; };
  k.state = st;
  return k;
}

/// OpenBLAS cblas_sgemm, row-major, on the matmul's inputs.
Kernel OpenBlasKernel(const Bench& b, const measure::TaskData& data, const Options& o) {
  const codegen::Workload& w = b.workload;
  openblas_set_num_threads(o.threads);
  struct State {
    Floats a, b, c;
  };
  auto st = std::make_shared<State>();
  st->a = CopyOf(data.inputs[0]);
  st->b = CopyOf(data.inputs[1]);
  st->c = Allocate(data.reference.size());
  FillNan(st->c.get(), data.reference.size());
  const int m = static_cast<int>(w.m), n = static_cast<int>(w.n), kk = static_cast<int>(w.k);
  Kernel k;
  k.note = std::string("cblas_sgemm, core ") + openblas_get_corename() + ", " +
           std::to_string(openblas_get_num_threads()) + " threads";
  State* s = st.get();
  k.run = [s, m, n, kk] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, kk, 1.0f, s->a.get(), kk, s->b.get(), n, 0.0f,
                s->c.get(), n);
  };
  k.output = [s] { return s->c.get(); };
  k.state = st;
  return k;
}

/// A oneDNN memory layout in its format-tag spelling, e.g. "nChw16c" or "nhwc" for `letters`
/// "nchw", "OIhw16i16o" for "oihw": the dimensions outermost first (by stride), blocked ones in
/// capitals, then the inner blocks.
std::string LayoutName(const dnnl::memory::desc& md, const std::string& letters) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.ndims != static_cast<int>(letters.size())) return "other";
  const auto& blk = d.format_desc.blocking;
  std::vector<int> order(d.ndims);
  for (int i = 0; i < d.ndims; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return blk.strides[a] > blk.strides[b]; });
  std::string name;
  for (int i : order) {
    bool blocked = false;
    for (int j = 0; j < blk.inner_nblks; ++j) blocked |= blk.inner_idxs[j] == i;
    name += blocked ? static_cast<char>(std::toupper(letters[i])) : letters[i];
  }
  for (int j = 0; j < blk.inner_nblks; ++j) name += std::to_string(blk.inner_blks[j]) + letters[blk.inner_idxs[j]];
  return name;
}

/// oneDNN convolution forward (inference, direct) on the workload's tensors. With `plain`,
/// src/dst are as the workload has them (nchw, or nChw8c / nChw16c for an NCHWc workload) and
/// the weights oihw for an nchw workload, as tune's kernel reads them, so any internal packing
/// is inside the timed call; an NCHWc workload's weights are format_tag::any, reordered
/// outside the timed call (tune packs them once too). Otherwise format_tag::any lets oneDNN
/// choose all its layouts; the reorders into them (and of the result back to nchw for the
/// check) happen outside the timed call.
Kernel OneDnnKernel(const Bench& b, const measure::TaskData& data, bool plain) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const codegen::Workload& w = b.workload;
  if (w.groups != 1) return Failed("unsupported", "grouped conv not benchmarked");
  const tag act = w.layout_block == 0    ? tag::nchw
                  : w.layout_block == 8  ? tag::nChw8c
                  : w.layout_block == 16 ? tag::nChw16c
                                         : tag::undef;
  if (act == tag::undef) return Failed("unsupported", "oneDNN has no nChw" + std::to_string(w.layout_block) + "c");
  try {
    struct State {
      dnnl::engine eng{dnnl::engine::kind::cpu, 0};
      dnnl::stream strm{eng};
      dnnl::convolution_forward conv;
      memory src, wei, dst, dst_user;
      Floats src_buf, wei_buf, dst_buf;
      std::unordered_map<int, memory> args;
    };
    auto st = std::make_shared<State>();
    dnnl::engine& eng = st->eng;
    dnnl::stream& strm = st->strm;
    memory::dims src_dims = {w.batch, w.in_c, w.in_h, w.in_w};
    memory::dims wei_dims = {w.out_c, w.in_c, w.kernel_h, w.kernel_w};
    memory::dims dst_dims = {w.batch, w.out_c, w.out_h(), w.out_w()};
    memory::dims strides = {w.stride_h, w.stride_w};
    memory::dims dilates = {w.dilation_h - 1, w.dilation_w - 1};
    memory::dims pad = {w.pad_h, w.pad_w};
    const auto f32 = memory::data_type::f32;
    memory::desc src_plain(src_dims, f32, act), wei_plain(wei_dims, f32, tag::oihw),
        dst_plain(dst_dims, f32, act);
    memory::desc src_md = plain ? src_plain : memory::desc(src_dims, f32, tag::any);
    memory::desc wei_md = plain && w.layout_block == 0 ? wei_plain : memory::desc(wei_dims, f32, tag::any);
    memory::desc dst_md = plain ? dst_plain : memory::desc(dst_dims, f32, tag::any);
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                         src_md, wei_md, dst_md, strides, dilates, pad, pad);
    dnnl::convolution_forward::primitive_desc pd(desc, eng);
    Kernel k;
    k.note = pd.impl_info_str();
    if (!plain || w.layout_block > 0) {
      k.note += " (src " + LayoutName(pd.src_desc(), "nchw") + ", wei " + LayoutName(pd.weights_desc(), "oihw") +
                ", dst " + LayoutName(pd.dst_desc(), "nchw") + ")";
    }
    st->conv = dnnl::convolution_forward(pd);

    st->src_buf = CopyOf(data.inputs[0]);
    st->wei_buf = CopyOf(data.inputs[1]);
    st->dst_buf = Allocate(data.reference.size());
    FillNan(st->dst_buf.get(), data.reference.size());
    memory src_user(src_plain, eng, st->src_buf.get()), wei_user(wei_plain, eng, st->wei_buf.get());
    st->dst_user = memory(dst_plain, eng, st->dst_buf.get());
    st->src = src_user;
    st->wei = wei_user;
    st->dst = st->dst_user;
    if (pd.src_desc() != src_plain) {
      st->src = memory(pd.src_desc(), eng);
      dnnl::reorder(src_user, st->src).execute(strm, src_user, st->src);
    }
    if (pd.weights_desc() != wei_plain) {
      st->wei = memory(pd.weights_desc(), eng);
      dnnl::reorder(wei_user, st->wei).execute(strm, wei_user, st->wei);
    }
    if (pd.dst_desc() != dst_plain) st->dst = memory(pd.dst_desc(), eng);
    strm.wait();
    st->args = {{DNNL_ARG_SRC, st->src}, {DNNL_ARG_WEIGHTS, st->wei}, {DNNL_ARG_DST, st->dst}};
    State* s = st.get();
    k.run = [s] {
      s->conv.execute(s->strm, s->args);
      s->strm.wait();
    };
    k.output = [s]() -> const float* {
      if (s->dst.get_desc() != s->dst_user.get_desc()) {
        dnnl::reorder(s->dst, s->dst_user).execute(s->strm, s->dst, s->dst_user);
        s->strm.wait();
      }
      return s->dst_buf.get();
    };
    k.state = st;
    return k;
  } catch (const dnnl::error& e) {
    return Failed("failed", std::string("oneDNN: ") + e.what());
  }
}

// ---------------------------------------------------------------------------------------
// Output.

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(line.find_first_not_of(" \t", pos + 1));
    }
  }
  return "unknown CPU";
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

std::string Today() {
  std::time_t now = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return buf;
}

std::string Gflops(double flops, const Kernel& r) {
  if (!r.ok) return r.status;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", flops / r.timing.median_s / 1e9);
  return buf;
}

std::string Ratio(const Kernel& a, const Kernel& b) {
  if (!a.ok || !b.ok) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx", b.timing.median_s / a.timing.median_s);
  return buf;
}

std::string Spread(const Kernel& r) {
  if (!r.ok) return r.status + ":";
  auto [lo, hi] = std::minmax_element(r.timing.samples.begin(), r.timing.samples.end());
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%.3f ms (min %.3f, max %.3f, %d calls/sample)", r.timing.median_s * 1e3,
                *lo * 1e3, *hi * 1e3, r.timing.number);
  return buf;
}

/// Progress of the tuning phase on stderr: a rewritten line on a terminal, else one line
/// per task every 16 trials.
class Progress {
 public:
  Progress() : tty_(isatty(STDERR_FILENO)) {}
  void operator()(const tuner::ProgressEvent& e) {
    if (!tty_ && !e.task_done && e.trials % 16 != 0) return;
    double gf = std::isfinite(e.best_s) ? e.task->workload.Flops() / e.best_s / 1e9 : 0;
    char buf[256];
    std::snprintf(buf, sizeof(buf), "tune [%d/%d] %-28.28s trials %3d/%-3d best %7.1f GFLOP/s  elapsed %.0fs",
                  e.task_index + 1, e.task_count, e.task->name.c_str(), e.trials, e.trials_budget, gf, e.elapsed_s);
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s%s", buf, e.task_done ? "\n" : "");
    } else {
      std::fprintf(stderr, "%s\n", buf);
    }
    std::fflush(stderr);
  }

 private:
  bool tty_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Tuned kernels vs OpenBLAS SGEMM and oneDNN convolution on this CPU."};
  app.add_option("--trials", o.trials, "tuning trials per workload")->check(CLI::NonNegativeNumber);
  app.add_option("--strategy", o.strategy, "search strategy (auto = tune's default; random, sa, bo_ucb, ...)");
  app.add_option("--threads", o.threads, "threads for tune's kernels, OpenBLAS and oneDNN")->check(CLI::Range(1, 256));
  app.add_option("--repeats", o.repeats, "timed samples per kernel (median reported)")->check(CLI::Range(1, 1000));
  app.add_option("--seed", o.seed, "search and data seed");
  app.add_option("--db", o.db_path, "record database (reused: already measured configs are not re-measured)");
  app.add_option("--min-sample-ms", o.min_sample_ms, "minimum duration of one timed sample")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup-ms", o.warmup_ms, "warm-up before timing and before each sample (calls of the kernel sampled next)")->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", o.timeout_s, "seconds one tuning candidate's measurement may take")
      ->check(CLI::PositiveNumber);
  app.add_option("--finalists", o.finalists,
                 "re-measure the search's K best configs here and keep the fastest (1 = its best)")
      ->check(CLI::Range(1, 100));
  app.add_flag("--interleave", o.interleave,
               "time each search batch's kernels in one process, sample by sample in turn (tune --interleave)");
  app.add_option("--only", o.only, "workload ids to run (" + WorkloadIds() + "; default: all but the NCHWc ones, conv1b..conv4b)")->delimiter(',');
  app.add_option("--config-json", o.config_json,
                 "ID=JSON: also time this config of workload ID (a hand-picked row, not tuned)");
  app.add_option("--dump-dir", o.dump_dir,
                 "write the object code of each of tune's timed kernels to DIR/ID-N.o (objdump -d reads it)");
  CLI11_PARSE(app, argc, argv);

  std::vector<Bench> benches;
  for (auto& b : Workloads()) {
    const bool asked = std::find(o.only.begin(), o.only.end(), b.id) != o.only.end();
    if (asked || (o.only.empty() && b.workload.layout_block == 0)) benches.push_back(b);
  }
  for (const auto& id : o.only) {
    if (std::none_of(benches.begin(), benches.end(), [&](const Bench& b) { return b.id == id; })) {
      std::fprintf(stderr, "unknown workload id '%s' (%s)\n", id.c_str(), WorkloadIds().c_str());
      return 2;
    }
  }
  std::multimap<std::string, std::string> hand_picked;
  for (const auto& s : o.config_json) {
    auto eq = s.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "--config-json wants ID=JSON, got %s\n", s.c_str());
      return 2;
    }
    hand_picked.emplace(s.substr(0, eq), s.substr(eq + 1));
  }

  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);

  // 1. Tune every workload first, before this process starts any thread pool: the local
  // runner forks a child per candidate.
  measure::Target target = measure::Target::HostCpu(o.threads);
  auto db = dataset::RecordDatabase::Open(o.db_path, /*create=*/true);
  if (!db.ok()) {
    std::fprintf(stderr, "cannot open %s: %s\n", o.db_path.c_str(), db.status().ToString().c_str());
    return 1;
  }
  std::vector<tuner::TuneTask> tasks;
  for (const auto& b : benches) tasks.push_back({b.label, b.workload, 1});
  tuner::TuneOptions to;
  to.trials_per_task = o.trials;
  to.seed = o.seed;
  to.strategy = o.strategy;
  to.threads = o.threads;
  to.resume = true;
  to.protocol.timeout_s = o.timeout_s;
  to.protocol.interleave = o.interleave;
  to.command = command;
  std::vector<tuner::TaskOutcome> outcomes;
  std::fprintf(stderr, "tuning %zu workloads, %d trials each, %d threads, database %s (target %s)\n", tasks.size(),
               o.trials, o.threads, o.db_path.c_str(), target.Key().c_str());
  Progress progress;
  tuner::Tuner tuner(db->get(), target, measure::LocalRunner::Factory(o.threads), to,
                     [&progress](const tuner::ProgressEvent& e) { progress(e); });
  if (o.trials > 0) {
    auto out = tuner.Run(tasks);
    if (!out.ok()) {
      std::fprintf(stderr, "tuning failed: %s\n", out.status().ToString().c_str());
      return 1;
    }
    outcomes = std::move(*out);
  } else {
    // --trials 0: no search and no tuned row (its untuned default would take seconds a call);
    // only the vendors and the hand-picked configs are timed.
    outcomes.resize(benches.size());
  }

  // 2. Time everything in this process.
  DnnlThreads dnnl_threads = FindDnnlThreads();
  if (dnnl_threads.runtime == "OpenMP") {
    if (dnnl_threads.set == nullptr) {
      std::fprintf(stderr, "oneDNN uses OpenMP but omp_set_num_threads was not found\n");
      return 1;
    }
    dnnl_threads.set(o.threads);
  } else if (dnnl_threads.runtime == "sequential" && o.threads != 1) {
    std::fprintf(stderr, "warning: oneDNN is sequential; its columns use 1 thread\n");
  }
  int dnnl_nthr = dnnl_threads.get_max ? dnnl_threads.get_max() : 1;
  openblas_set_num_threads(o.threads);
  codegen::runtime::SetNumThreads(o.threads);
  auto target_info = (*db)->FindTarget(target.Key());
  const int64_t target_id = target_info.ok() && target_info->has_value() ? (*target_info)->id : 0;
  const std::string load_before = LoadAverage();

  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
  for (size_t i = 0; i < benches.size(); ++i) {
    const Bench& b = benches[i];
    const tuner::TaskOutcome& oc = outcomes[i];
    const double flops = b.workload.Flops();
    std::fprintf(stderr, "timing %s ...\n", b.label.c_str());
    measure::TaskData data = measure::TaskData::Create(b.workload, o.seed + 0x5eedULL);
    const bool gemm = b.workload.op != codegen::OpKind::kConv2d;

    // The tuned config: the search's best, or with --finalists K the fastest in this process
    // of the search's K best (a selection round whose samples are not reported).
    std::string best = oc.best_config;
    if (o.finalists > 1 && target_id != 0) {
      auto top = (*db)->Best(oc.task_id, target_id, o.finalists);
      if (top.ok() && top->size() > 1) {
        std::vector<Kernel> cands;
        for (const auto& rec : *top) cands.push_back(TuneKernel(b, rec.config_json, data, o));
        std::vector<Kernel*> ptrs;
        for (auto& c : cands) ptrs.push_back(&c);
        Options sel = o;
        sel.repeats = 3;
        Measure(ptrs, data, sel);
        double best_s = kInf;
        for (size_t j = 0; j < cands.size(); ++j) {
          if (cands[j].ok && cands[j].timing.median_s < best_s) {
            best_s = cands[j].timing.median_s;
            best = (*top)[j].config_json;
          }
        }
      }
    }

    Kernel tuned = o.trials == 0   ? Failed("not tuned", "--trials 0")
                   : best.empty() ? Failed("no kernel", "no successful trial")
                                  : TuneKernel(b, best, data, o);
    std::vector<Kernel> picked;
    auto [lo, hi] = hand_picked.equal_range(b.id);
    for (auto it = lo; it != hi; ++it) picked.push_back(TuneKernel(b, it->second, data, o));
    Kernel vendor = gemm ? OpenBlasKernel(b, data, o) : OneDnnKernel(b, data, /*plain=*/true);
    // (An NCHWc workload's vendor column is oneDNN in that layout already.)
    const bool nchwc = b.workload.layout_block > 0;
    Kernel any = gemm || nchwc ? Failed("-", "") : OneDnnKernel(b, data, /*plain=*/false);
    std::vector<Kernel*> all = {&tuned, &vendor};
    if (!gemm && !nchwc) all.push_back(&any);
    for (auto& p : picked) all.push_back(&p);
    Measure(all, data, o);

    const std::string vendor_name = gemm ? "OpenBLAS" : nchwc ? "oneDNN nChw" + std::to_string(b.workload.layout_block) + "c" : "oneDNN nchw";
    auto add_row = [&](const std::string& label, const Kernel& t) {
      rows.push_back({label, Gflops(flops, t), vendor_name, Gflops(flops, vendor), Ratio(t, vendor),
                      gemm || nchwc ? "" : Gflops(flops, any), gemm || nchwc ? "" : Ratio(t, any)});
    };
    add_row(b.label + " [tuned]", tuned);
    for (const auto& p : picked) add_row(b.label + " [hand-picked]", p);

    char head[256];
    std::snprintf(head, sizeof(head), "%s: %d trials (%d failed, %d measured now), search measured %.1f GFLOP/s",
                  b.label.c_str(), oc.trials, oc.failed, oc.measured_now,
                  std::isfinite(oc.best_s) ? flops / oc.best_s / 1e9 : 0.0);
    notes.push_back(head);
    notes.push_back("  tuned:       " + Spread(tuned) + " " + tuned.note);
    for (const auto& p : picked) notes.push_back("  hand-picked: " + Spread(p) + " " + p.note);
    notes.push_back("  " + vendor_name + ": " + Spread(vendor) + " " + vendor.note);
    if (!gemm && !nchwc) notes.push_back("  oneDNN any:  " + Spread(any) + " " + any.note);
  }

  std::printf("CPU vendor benchmark: tuned kernels vs OpenBLAS / oneDNN\n");
  std::printf("machine: %s (%s), %u logical CPUs\n", CpuModel().c_str(), target.cpu.c_str(),
              std::thread::hardware_concurrency());
  const dnnl_version_t* dv = dnnl_version();
  std::printf("date: %s\n", Today().c_str());
  std::printf("threads: %d (tune runtime %d, OpenBLAS %d, oneDNN %s %d)\n", o.threads,
              codegen::runtime::NumThreads(), openblas_get_num_threads(), dnnl_threads.runtime.c_str(), dnnl_nthr);
  std::printf("trials: %d per workload (strategy %s, seed %llu, database %s; records already there count,\n"
              "        see the trial counts below)%s\n", o.trials, o.strategy.c_str(),
              static_cast<unsigned long long>(o.seed), o.db_path.c_str(),
              o.interleave ? "; each search batch timed interleaved in one process" : "");
  std::printf("vendors: OpenBLAS %s; oneDNN %d.%d.%d\n", openblas_get_config(), dv->major, dv->minor, dv->patch);
  std::printf("load average: %s before timing, %s after\n", load_before.c_str(), LoadAverage().c_str());
  std::printf("timing: in-process, median of %d samples of back-to-back calls >= %.0f ms each, each sample after\n"
              "        >= %.0f ms of warm-up calls of its kernel, samples of a workload's kernels interleaved;\n"
              "        tuned = %s\n\n",
              o.repeats, o.min_sample_ms, o.warmup_ms,
              o.finalists > 1 ? ("fastest here of the search's " + std::to_string(o.finalists) + " best").c_str()
                              : "the search's best config");
  base::PrintTable({"workload", "tune GFLOP/s", "vendor", "vendor GFLOP/s", "tune/vendor", "oneDNN any GFLOP/s",
              "tune/any"},
             rows, {.align = {}, .markdown = true});
  std::printf("\n");
  for (const auto& n : notes) std::printf("%s\n", n.c_str());
  return 0;
}
