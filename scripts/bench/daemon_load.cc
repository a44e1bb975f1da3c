// daemon_load: N simulated workers against one `tune serve` on loopback. Each worker registers
// like `tune worker --target llvm`, takes batches on its own Work stream and answers every
// config at once with a cost derived from the config text (no kernel is built or run), so the
// daemon's own path is what is measured: leasing, result ingestion, the SQLite commit, the Ack,
// and the search that proposes the next batch. Prints one JSON object: results/s sent, acked
// (committed, seen by the workers), ingested and committed (the daemon's counters); dispatch
// p50/p99 (the daemon's histogram: a Ready, or the batch's queueing if later, to the Batch
// written; bucket upper edges, 19% apart) and wait p50/p99 (a worker's Ready to its next
// Batch, including time with no batch queued anywhere).
//
// Soak mode (--soak-pid PID, the daemon's process on this machine): --seconds of unbroken
// load, each job resubmitted as soon as it ends (--job-trials each), the daemon's RSS, open
// file descriptors and threads read from /proc/PID every --sample-every seconds with the
// results committed; prints one table row per sample as it is taken, writes the samples as TSV
// (--samples) and ends with a verdict on their growth after --warmup (SoakLimits); exit status
// 0 when nothing grew beyond the tolerances, 1 otherwise. --judge FILE gives the verdict of a
// TSV written earlier (or made up) without any daemon.
//
//   daemon_load --server 127.0.0.1:7117 --workers 64 [--jobs 4] [--batch N] [--seconds 5]
//   daemon_load --server ... --soak-pid PID --seconds 3600 [--sample-every 10] [--samples F]
//   daemon_load --judge samples.tsv [--warmup 60]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/exit_code.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "measure/target.h"
#include "server/latency_histogram.h"
#include "server/wire_names.h"
#include "tune/v1/tune.grpc.pb.h"
#include "tuner/tuning_flags.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = tune::v1;

double Now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

/// Makes one unary call whose answer does not matter (heartbeats, cancellations).
template <typename Stub, typename Request, typename Reply>
void CallAndForget(Stub& stub, grpc::Status (Stub::*call)(grpc::ClientContext*, const Request&, Reply*),
                   const Request& request) {
  grpc::ClientContext ctx;
  Reply reply;
  (void)(stub.*call)(&ctx, request, &reply);
}

struct Shared {
  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<uint64_t> results_acked{0}, results_sent{0}, batches{0};
  std::mutex mu;
  std::vector<double> wait_s;  // Ready sent -> Batch received, while measuring
};

/// One simulated worker: Ready -> Batch -> Results (at once) -> Ready ..., Acks counted as
/// they come.
void RunWorker(const std::shared_ptr<grpc::Channel>& channel, uint64_t id, Shared* shared) {
  auto stub = v1::Worker::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->Work(&ctx);
  v1::WorkerMessage ready;
  ready.mutable_ready()->set_worker_id(id);
  double ready_at = Now();
  if (!stream->Write(ready)) return;
  std::deque<int> sizes;  // configs of the batches not yet acknowledged
  v1::DaemonMessage in;
  while (!shared->stop && stream->Read(&in)) {
    if (in.has_batch()) {
      if (shared->measuring) {
        const double waited = Now() - ready_at;
        std::lock_guard<std::mutex> lock(shared->mu);
        shared->wait_s.push_back(waited);
      }
      const v1::Batch& b = in.batch();
      v1::WorkerMessage out;
      v1::Results* r = out.mutable_results();
      r->set_batch_id(b.batch_id());
      for (const std::string& c : b.configs_json()) {
        v1::MeasureResult* m = r->add_results();
        m->set_index(static_cast<uint32_t>(r->results_size() - 1));
        m->set_status("ok");
        const double cost = 1e-3 * (1 + static_cast<double>(std::hash<std::string>{}(c) % 1000) / 1000);
        for (int i = 0; i < 3; ++i) m->add_costs_s(cost);
        m->set_number(1);
      }
      sizes.push_back(b.configs_json_size());
      if (shared->measuring) {
        shared->results_sent += b.configs_json_size();
        ++shared->batches;
      }
      if (!stream->Write(out)) break;
      ready_at = Now();
      if (!stream->Write(ready)) break;
    } else if (in.has_ack() && !sizes.empty()) {
      if (shared->measuring && !in.ack().discarded()) shared->results_acked += sizes.front();
      sizes.pop_front();
    }
  }
  ctx.TryCancel();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

int Fail(const std::string& what) { return tune::base::Fail("daemon_load", tune::base::kExitFailure, what); }

/// One reading of the daemon process during a soak.
struct SoakSample {
  double t_s = 0;              // since the load started
  double rss_mib = 0;          // VmRSS of /proc/PID/status
  int fds = 0;                 // entries of /proc/PID/fd
  int threads = 0;             // Threads of /proc/PID/status
  uint64_t committed = 0;      // results committed since the daemon started (Health)
  uint64_t jobs_ended = 0;     // jobs of this run that ended (each was resubmitted)
  double results_per_s = 0;    // committed over the interval before this sample
  double dispatch_p99_ms = 0;  // the daemon's dispatch p99 over the interval before this sample
};

/// What a soak tolerates after its warm-up. The first third of the samples taken after
/// warmup_s is compared with the last third (maxima for the counts, medians for RSS), so one
/// passing spike or a job in transition does not read as growth:
///  - fds, threads: the last third's maximum at most fd_slack / thread_slack above the first
///    third's. Every running job holds its own database connection (the file, its WAL and
///    shm index) and a thread, and they come and go as jobs end and are resubmitted; a leak
///    per job, stream or batch goes past a constant within a few dozen jobs.
///  - RSS: growth (last third's median minus the first third's) beyond both rss_slack_mib and
///    rss_pct_per_hour of the first third's median per hour between the two thirds' middles
///    (linear extrapolation). Under load RSS moves by +-3 MiB between samples (the medians of
///    the thirds by 1-2 MiB), and some settling goes on after the warm-up (glibc's per-thread
///    arenas keep freed blocks, SQLite's page caches fill up to their cap): the constant covers
///    both, and is all a short run can tell from noise. Over an hour the rate decides: 5%/h
///    would be 3.4x in a day, and is about the least an hour's run resolves above the
///    constant for a daemon of 150-200 MiB.
struct SoakLimits {
  double warmup_s = 60;
  int fd_slack = 8;
  int thread_slack = 8;
  double rss_slack_mib = 8;
  double rss_pct_per_hour = 5;
  /// When > 0, RSS growth is also tolerated up to this many KiB per job ended between the two
  /// thirds' middles: a soak of short jobs judges growth per job (0: not).
  double rss_kib_per_job = 0;
};

/// The verdict on a soak: ok when nothing grew beyond the limits and results were still
/// committed in the last third; `text` has one line per measure and a last line
/// "verdict: PASS" or "verdict: FAIL (what grew, or that the load stopped)".
struct SoakVerdict {
  bool ok = false;
  std::string text;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Judges `samples` (in time order) against `limits`; fewer than 3 samples after the warm-up
/// fail (nothing can be said), and so does a load that committed nothing in the last third.
SoakVerdict JudgeSoak(const std::vector<SoakSample>& samples, const SoakLimits& limits) {
  std::vector<SoakSample> post;
  for (const SoakSample& s : samples)
    if (s.t_s >= limits.warmup_s) post.push_back(s);
  SoakVerdict v;
  if (post.size() < 3) {
    v.text = absl::StrCat("verdict: FAIL (", post.size(), " samples after the ", limits.warmup_s,
                          " s warm-up; at least 3 are needed)\n");
    return v;
  }
  const size_t third = post.size() / 3;
  const std::vector<SoakSample> first(post.begin(), post.begin() + static_cast<std::ptrdiff_t>(third));
  const std::vector<SoakSample> last(post.end() - static_cast<std::ptrdiff_t>(third), post.end());
  std::vector<std::string> grew;  // what failed
  char line[512];
  auto count = [&](const char* name, int SoakSample::*field, int slack) {
    int first_max = 0, last_max = 0;
    for (const SoakSample& s : first) first_max = std::max(first_max, s.*field);
    for (const SoakSample& s : last) last_max = std::max(last_max, s.*field);
    const bool ok = last_max - first_max <= slack;
    if (!ok) grew.push_back(absl::StrCat(name, " grew"));
    std::snprintf(line, sizeof line,
                  "%s: %d at the first sample after the warm-up, %d at the last; most in the first third %d, "
                  "in the last third %d: %+d (tolerance +%d) %s\n",
                  name, post.front().*field, post.back().*field, first_max, last_max, last_max - first_max, slack,
                  ok ? "ok" : "GREW");
    v.text += line;
  };
  count("fds", &SoakSample::fds, limits.fd_slack);
  count("threads", &SoakSample::threads, limits.thread_slack);
  std::vector<double> a, b;
  double ta = 0, tb = 0;
  for (const SoakSample& s : first) a.push_back(s.rss_mib), ta += s.t_s;
  for (const SoakSample& s : last) b.push_back(s.rss_mib), tb += s.t_s;
  const double base = Median(a), end = Median(b), hours = std::max(1e-9, (tb - ta) / static_cast<double>(third) / 3600);
  const double growth = end - base;
  std::vector<double> ja, jb;
  for (const SoakSample& s : first) ja.push_back(static_cast<double>(s.jobs_ended));
  for (const SoakSample& s : last) jb.push_back(static_cast<double>(s.jobs_ended));
  const double jobs_between = std::max(0.0, Median(jb) - Median(ja));
  const double allowed = std::max({limits.rss_slack_mib, base * limits.rss_pct_per_hour / 100 * hours,
                                   limits.rss_kib_per_job * jobs_between / 1024});
  const bool rss_ok = growth <= allowed;
  if (!rss_ok) grew.push_back("RSS grew");
  if (limits.rss_kib_per_job > 0) {
    std::snprintf(line, sizeof line,
                  "RSS per job: %.0f jobs ended between the thirds' middles, %+.1f KiB per job (tolerance %.0f KiB)\n",
                  jobs_between, growth * 1024 / std::max(jobs_between, 1.0), limits.rss_kib_per_job);
    v.text += line;
  }
  std::snprintf(line, sizeof line,
                "RSS: %.1f MiB at the first sample after the warm-up, %.1f at the last; median of the first third "
                "%.1f, of the last third %.1f: %+.1f MiB in %.3f h (%+.1f MiB/h, %+.1f%%/h); tolerance the more of "
                "%.0f MiB and %.0f%%/h: %.1f MiB %s\n",
                post.front().rss_mib, post.back().rss_mib, base, end, growth, hours, growth / hours,
                100 * growth / std::max(base, 1e-9) / hours, limits.rss_slack_mib, limits.rss_pct_per_hour, allowed,
                rss_ok ? "ok" : "GREW");
  v.text += line;
  // The load itself must go on to the end: results committed during the last third.
  const uint64_t last_results = post.back().committed - post[post.size() - third - 1].committed;
  const bool flowing = last_results > 0;
  std::snprintf(line, sizeof line, "results: %llu committed after the warm-up, %llu during the last third %s\n",
                static_cast<unsigned long long>(post.back().committed - post.front().committed),
                static_cast<unsigned long long>(last_results), flowing ? "ok" : "STOPPED");
  v.text += line;
  if (!flowing) grew.push_back("the load stopped");
  v.ok = grew.empty();
  v.text += v.ok ? "verdict: PASS\n" : absl::StrCat("verdict: FAIL (", absl::StrJoin(grew, ", "), ")\n");
  return v;
}

constexpr const char* kSampleHeader =
    "t_s\trss_mib\tfds\tthreads\tcommitted\tjobs_ended\tresults_per_s\tdispatch_p99_ms";

std::string SampleTsv(const SoakSample& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%.2f\t%.2f\t%d\t%d\t%llu\t%llu\t%.1f\t%.3f", s.t_s, s.rss_mib, s.fds, s.threads,
                static_cast<unsigned long long>(s.committed), static_cast<unsigned long long>(s.jobs_ended),
                s.results_per_s, s.dispatch_p99_ms);
  return buf;
}

std::string SampleRow(const SoakSample& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%8.1f %8.1f %5d %7d %10.0f %15.3f %10llu", s.t_s, s.rss_mib, s.fds, s.threads,
                s.results_per_s, s.dispatch_p99_ms, static_cast<unsigned long long>(s.jobs_ended));
  return buf;
}

constexpr const char* kSampleRowHeader = "     t s  RSS MiB   fds threads  results/s dispatch p99 ms jobs ended";

/// The samples of a TSV written by a soak (a header line, then SampleTsv lines).
absl::StatusOr<std::vector<SoakSample>> ReadSamples(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot read " + path);
  std::vector<SoakSample> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (++n == 1 || line.empty()) continue;
    std::istringstream fields(line);
    SoakSample s;
    unsigned long long committed = 0, ended = 0;
    if (!(fields >> s.t_s >> s.rss_mib >> s.fds >> s.threads >> committed >> ended >> s.results_per_s >>
          s.dispatch_p99_ms))
      return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": not a sample line: ", line));
    s.committed = committed;
    s.jobs_ended = ended;
    out.push_back(s);
  }
  return out;
}

/// RSS, threads and open descriptors of process `pid` now; nullopt once it is gone.
std::optional<SoakSample> ReadProcess(int pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  if (!status) return std::nullopt;
  SoakSample s;
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      double kib = 0;
      status >> kib;
      s.rss_mib = kib / 1024;
    } else if (key == "Threads:") {
      status >> s.threads;
    }
    status.ignore(1 << 20, '\n');
  }
  std::error_code ec;
  for (std::filesystem::directory_iterator it(absl::StrCat("/proc/", pid, "/fd"), ec), end; !ec && it != end;
       it.increment(ec))
    ++s.fds;
  if (ec || s.threads == 0) return std::nullopt;
  return s;
}

/// A soak's settings beyond the limits.
struct SoakOptions {
  int pid = 0;              // the daemon's process
  int jobs = 4;             // jobs kept running at once
  double seconds = 3600;    // of load, from the first sample
  double sample_every = 10;
  std::string samples_path;  // TSV of every sample; none when empty
};

/// Keeps `options.jobs` jobs running (`make_job(slot, round)` makes each request; a job that
/// ends is resubmitted at once) while sampling process `options.pid` and the daemon's Health;
/// prints a row per sample and the verdict. Returns the exit status: 0 when nothing grew and
/// every job ended done, 1 otherwise.
int RunSoak(v1::Tune::Stub& client, const std::function<std::optional<v1::HealthReply>()>& health,
            const std::function<v1::SubmitJobRequest(int slot, uint64_t round)>& make_job, const SoakOptions& options,
            const SoakLimits& limits, Shared* shared) {
  struct Slots {
    std::mutex mu;
    std::vector<uint64_t> running;  // per slot; 0 between jobs
    std::atomic<uint64_t> ended{0}, failed{0}, submit_errors{0};
    std::string last_problem;       // guarded by mu
  } slots;
  slots.running.assign(static_cast<size_t>(options.jobs), 0);
  auto problem = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(slots.mu);
    slots.last_problem = what;
  };
  std::vector<std::thread> slot_threads;
  for (int slot = 0; slot < options.jobs; ++slot) {
    slot_threads.emplace_back([&, slot] {
      for (uint64_t round = 0; !shared->stop; ++round) {
        uint64_t id = 0;
        {
          grpc::ClientContext ctx;
          v1::SubmitJobReply reply;
          grpc::Status st = client.SubmitJob(&ctx, make_job(slot, round), &reply);
          if (!st.ok()) {  // e.g. the ended jobs' threads not yet counted out: try again soon
            ++slots.submit_errors;
            problem("submit: " + st.error_message());
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            continue;
          }
          id = reply.job_id();
        }
        {
          std::lock_guard<std::mutex> lock(slots.mu);
          slots.running[static_cast<size_t>(slot)] = id;
        }
        grpc::ClientContext ctx;
        v1::WatchJobRequest req;
        req.set_job_id(id);
        auto events = client.WatchJob(&ctx, req);
        v1::JobEvent e;
        v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
        std::string message;
        while (events->Read(&e)) {
          state = e.state();
          message = e.message();
        }
        (void)events->Finish();
        if (shared->stop) break;
        {
          std::lock_guard<std::mutex> lock(slots.mu);
          slots.running[static_cast<size_t>(slot)] = 0;
        }
        ++slots.ended;
        if (state != v1::JOB_DONE) {
          ++slots.failed;
          problem(absl::StrCat("job ", id, " ended ", v1::JobState_Name(state), ": ", message));
        }
      }
    });
  }

  std::ofstream tsv;
  if (!options.samples_path.empty()) {
    tsv.open(options.samples_path, std::ios::trunc);
    if (!tsv) return Fail("cannot write " + options.samples_path);
    tsv << kSampleHeader << "\n";
  }
  std::printf("soak: daemon pid %d, %d jobs resubmitted as they end, %.0f s, a sample every %.1f s\n%s\n",
              options.pid, options.jobs, options.seconds, options.sample_every, kSampleRowHeader);
  std::vector<SoakSample> samples;
  std::optional<v1::HealthReply> before;
  const double t0 = Now();
  int status = tune::base::kExitOk;
  for (int i = 0;; ++i) {
    std::optional<SoakSample> s = ReadProcess(options.pid);
    std::optional<v1::HealthReply> h = health();
    if (!s || !h) {
      status = Fail(!s ? absl::StrCat("the daemon's process ", options.pid, " is gone")
                       : std::string("the daemon stopped answering Health"));
      break;
    }
    s->t_s = Now() - t0;
    s->committed = h->results_committed();
    s->jobs_ended = slots.ended;
    if (before && !samples.empty()) {
      const double dt = s->t_s - samples.back().t_s;
      s->results_per_s = static_cast<double>(s->committed - samples.back().committed) / std::max(dt, 1e-9);
      std::vector<uint64_t> dispatch(tune::server::LatencyHistogram::kBuckets, 0);
      for (int b = 0; b < h->dispatch_us_histogram_size() && b < tune::server::LatencyHistogram::kBuckets; ++b)
        dispatch[b] = h->dispatch_us_histogram(b) -
                      (b < before->dispatch_us_histogram_size() ? before->dispatch_us_histogram(b) : 0);
      s->dispatch_p99_ms = 1e3 * tune::server::LatencyHistogram::Quantile(dispatch, 0.99);
    }
    before = h;
    samples.push_back(*s);
    std::printf("%s\n", SampleRow(*s).c_str());
    std::fflush(stdout);
    if (tsv.is_open()) tsv << SampleTsv(*s) << std::endl;
    if (s->t_s >= options.seconds) break;
    const double next = t0 + options.sample_every * (i + 1);
    std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, next - Now())));
  }
  shared->stop = true;
  {
    std::lock_guard<std::mutex> lock(slots.mu);
    for (uint64_t id : slots.running) {
      if (id == 0) continue;
      v1::CancelJobRequest req;
      req.set_job_id(id);
      CallAndForget(client, &v1::Tune::Stub::CancelJob, req);
    }
  }
  const SoakSample& last = samples.empty() ? SoakSample{} : samples.back();
  std::printf("soak: %llu results committed by the daemon (%.0f/s over %.0f s), %llu jobs ended, %llu not done, "
              "%llu submissions refused\n",
              static_cast<unsigned long long>(last.committed),
              samples.size() > 1 ? static_cast<double>(last.committed - samples.front().committed) /
                                       std::max(last.t_s - samples.front().t_s, 1e-9)
                                 : 0.0,
              last.t_s, static_cast<unsigned long long>(slots.ended.load()),
              static_cast<unsigned long long>(slots.failed.load()),
              static_cast<unsigned long long>(slots.submit_errors.load()));
  {
    std::lock_guard<std::mutex> lock(slots.mu);
    if (!slots.last_problem.empty()) std::printf("soak: last problem: %s\n", slots.last_problem.c_str());
  }
  const SoakVerdict verdict = JudgeSoak(samples, limits);
  std::printf("%s", verdict.text.c_str());
  if (slots.failed > 0) std::printf("soak: FAIL (%llu jobs did not end done)\n",
                                    static_cast<unsigned long long>(slots.failed.load()));
  std::fflush(stdout);
  if (status == tune::base::kExitOk && (!verdict.ok || slots.failed > 0)) status = tune::base::kExitFailure;
  // The slots' Watch streams and the workers' streams end with the daemon; leave without
  // joining them.
  std::_Exit(status);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"N simulated workers against one tune daemon; prints throughput and dispatch latency"};
  std::string server = "127.0.0.1:7117";
  int workers = 1, jobs = 4, batch = 0, channels = 8;
  double seconds = 5, warmup = -1;
  std::string shape = "1024,1024,1024";
  SoakOptions soak;
  SoakLimits limits;
  uint32_t job_trials = 0;
  std::string judge;
  app.add_option("--server", server, "daemon address")->capture_default_str();
  app.add_option("--workers", workers, "simulated workers")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--jobs", jobs, "tuning jobs submitted (they share the workers)")->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--batch", batch, "configs per job round; 0 = 16 per worker, at most the daemon's limit")
      ->check(CLI::Range(0, tune::tuner::TuningFlags::kMaxBatch));
  app.add_option("--seconds", seconds, "measured interval (in a soak: the whole run)")
      ->check(CLI::Range(0.5, 7 * 86400.0))->capture_default_str();
  app.add_option("--warmup", warmup,
                 "seconds before measuring (default 2); in a soak or --judge, the samples before it are not "
                 "judged (default 60)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--channels", channels, "connections the workers' streams are spread over")
      ->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--shape", shape, "M,N,K of the matmul the first job tunes (M + i for the i-th)")
      ->capture_default_str();
  app.add_option("--job-trials", job_trials, "trials of each job; 0 = 1000000 (in a soak: 20000)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--soak-pid", soak.pid, "soak the daemon whose process this is (on this machine)")
      ->check(CLI::PositiveNumber);
  app.add_option("--sample-every", soak.sample_every, "seconds between a soak's samples")
      ->check(CLI::Range(0.1, 3600.0))->capture_default_str();
  app.add_option("--samples", soak.samples_path, "TSV file for a soak's samples");
  app.add_option("--judge", judge, "only print the verdict on the samples of this TSV file (no daemon)");
  app.add_option("--fd-slack", limits.fd_slack, "soak: open descriptors tolerated beyond the first third's most")
      ->capture_default_str();
  app.add_option("--thread-slack", limits.thread_slack, "soak: threads tolerated beyond the first third's most")
      ->capture_default_str();
  app.add_option("--rss-slack-mib", limits.rss_slack_mib, "soak: RSS growth tolerated at any length, MiB")
      ->capture_default_str();
  app.add_option("--rss-kib-per-job", limits.rss_kib_per_job,
                 "soak: RSS growth tolerated per job ended between the thirds, KiB (0: not judged per job)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--rss-pct-per-hour", limits.rss_pct_per_hour, "soak: RSS growth tolerated per hour, %")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  // 16 configs per worker and round, up to the most a job's round may hold (from 65 workers on,
  // each worker's share of a round is smaller).
  if (batch == 0) batch = std::min(16 * workers, tune::tuner::TuningFlags::kMaxBatch);
  const bool soaking = soak.pid > 0;
  limits.warmup_s = warmup >= 0 ? warmup : limits.warmup_s;
  if (warmup < 0) warmup = 2;
  if (job_trials == 0) job_trials = soaking ? 20000 : 1000000;
  if (!judge.empty()) {
    absl::StatusOr<std::vector<SoakSample>> samples = ReadSamples(judge);
    if (!samples.ok()) return tune::base::Fail("daemon_load", samples.status());
    const SoakVerdict verdict = JudgeSoak(*samples, limits);
    std::printf("%s", verdict.text.c_str());
    return verdict.ok ? tune::base::kExitOk : tune::base::kExitFailure;
  }

  std::vector<std::shared_ptr<grpc::Channel>> conns;
  for (int c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one TCP connection per channel
    args.SetInt("tune.load.channel", c);
    args.SetMaxReceiveMessageSize(64 << 20);
    conns.push_back(grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args));
  }
  auto client = v1::Tune::NewStub(conns[0]);
  std::string health_error;  // why the last Health call failed
  auto health = [&]() -> std::optional<v1::HealthReply> {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ctx.set_wait_for_ready(true);  // the daemon may have just started listening: connect, do not fail fast
    v1::HealthReply h;
    if (grpc::Status st = client->Health(&ctx, v1::HealthRequest{}, &h); !st.ok()) {
      health_error = st.error_message();
      return std::nullopt;
    }
    return h;
  };
  if (!health()) return Fail("no daemon answers at " + server + ": " + health_error);

  // Register the workers as this host's CPU (the jobs' templates are the CPU ones).
  const tune::measure::Target target = tune::measure::Target::HostCpu(1);
  auto worker_stub = v1::Worker::NewStub(conns[0]);
  std::vector<uint64_t> ids;
  for (int i = 0; i < workers; ++i) {
    v1::RegisterRequest req;
    req.set_name(absl::StrCat("sim-", i));
    req.set_host("loopback");
    req.set_target("llvm");
    req.set_target_key(target.Key());
    req.set_target_json(target.ToJson());
    req.set_protocol(tune::server::kWireProtocol);
    grpc::ClientContext ctx;
    v1::RegisterReply reply;
    if (auto st = worker_stub->Register(&ctx, req, &reply); !st.ok()) return Fail("register: " + st.error_message());
    ids.push_back(reply.worker_id());
  }
  Shared shared;
  std::vector<std::thread> threads;
  for (int i = 0; i < workers; ++i) threads.emplace_back(RunWorker, conns[i % channels], ids[i], &shared);
  std::thread heart([&] {  // as real workers do, so idle ones are not expired
    while (!shared.stop) {
      for (uint64_t id : ids) {
        v1::HeartbeatRequest hb;
        hb.set_worker_id(id);
        CallAndForget(*worker_stub, &v1::Worker::Stub::Heartbeat, hb);
      }
      for (int i = 0; i < 10 && !shared.stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  // Job `slot` of `round` (a soak resubmits each slot's job as it ends, with a fresh seed).
  // Jobs of one task would share its tuning lease (the record database lets one run tune a
  // task at a time; the others end at once with no trial), so each job tunes a matmul of its
  // own: M (of --shape) grows by one per job.
  const size_t m_end = shape.find(',');
  const long long m = std::atoll(shape.substr(0, m_end).c_str());
  if (m < 1) return Fail("--shape must start with M >= 1, got '" + shape + "'");
  auto make_job = [&](int slot, uint64_t round) {
    const uint64_t seq = static_cast<uint64_t>(slot) + round * static_cast<uint64_t>(jobs);
    const std::string job_shape =
        absl::StrCat(m + static_cast<long long>(seq), m_end == std::string::npos ? "" : shape.substr(m_end));
    v1::SubmitJobRequest req;
    req.set_model_json(absl::StrCat(R"({"name": "load", "layers": [{"name": "mm", "op": "matmul", "shape": ")",
                                    job_shape, R"("}]})"));
    req.set_name(absl::StrCat("load-", slot, round > 0 ? absl::StrCat("-", round) : ""));
    req.set_target("llvm");
    req.set_trials(job_trials);
    req.set_strategy("random");
    req.set_cost_model("none");
    req.set_seed(1 + seq);
    req.set_batch(static_cast<uint32_t>(batch));
    return req;
  };
  if (soaking) {
    soak.jobs = jobs;
    soak.seconds = seconds;
    return RunSoak(*client, health, make_job, soak, limits, &shared);
  }
  std::vector<uint64_t> job_ids;
  for (int j = 0; j < jobs; ++j) {
    grpc::ClientContext ctx;
    v1::SubmitJobReply reply;
    if (auto st = client->SubmitJob(&ctx, make_job(j, 0), &reply); !st.ok()) return Fail("submit: " + st.error_message());
    job_ids.push_back(reply.job_id());
  }

  std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  auto h0 = health();
  const double t0 = Now();
  shared.measuring = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  shared.measuring = false;
  const double elapsed = Now() - t0;
  auto h1 = health();

  for (uint64_t id : job_ids) {
    v1::CancelJobRequest req;
    req.set_job_id(id);
    CallAndForget(*client, &v1::Tune::Stub::CancelJob, req);
  }
  shared.stop = true;
  heart.join();
  if (!h0 || !h1) return Fail("the daemon stopped answering Health: " + health_error);

  const double ingested = static_cast<double>(h1->results_ingested() - h0->results_ingested()) / elapsed;
  const double committed = static_cast<double>(h1->results_committed() - h0->results_committed()) / elapsed;
  std::vector<double> lat;
  {
    std::lock_guard<std::mutex> lock(shared.mu);
    lat = shared.wait_s;
  }
  std::vector<uint64_t> dispatch(tune::server::LatencyHistogram::kBuckets, 0);
  for (int i = 0; i < h1->dispatch_us_histogram_size() && i < tune::server::LatencyHistogram::kBuckets; ++i)
    dispatch[i] = h1->dispatch_us_histogram(i) - (i < h0->dispatch_us_histogram_size() ? h0->dispatch_us_histogram(i) : 0);
  using H = tune::server::LatencyHistogram;
  std::printf(
      "{\"workers\": %d, \"jobs\": %d, \"batch\": %d, \"seconds\": %.2f, \"batches\": %llu, "
      "\"results_sent_per_s\": %.0f, \"results_acked_per_s\": %.0f, \"ingested_per_s\": %.0f, "
      "\"committed_per_s\": %.0f, \"dispatch_p50_ms\": %.3f, \"dispatch_p99_ms\": %.3f, "
      "\"wait_p50_ms\": %.3f, \"wait_p99_ms\": %.3f}\n",
      workers, jobs, batch, elapsed, static_cast<unsigned long long>(shared.batches.load()),
      static_cast<double>(shared.results_sent.load()) / elapsed,
      static_cast<double>(shared.results_acked.load()) / elapsed, ingested, committed,
      1e3 * H::Quantile(dispatch, 0.5), 1e3 * H::Quantile(dispatch, 0.99), 1e3 * Percentile(lat, 0.5),
      1e3 * Percentile(lat, 0.99));
  std::fflush(stdout);
  // Streams still blocked in Read end when the daemon stops (the caller stops it next);
  // leave without joining them.
  std::_Exit(0);
}
