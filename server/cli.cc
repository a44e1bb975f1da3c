// `tune serve` (the daemon until SIGTERM), `tune worker` (a device agent), `tune workers`, `tune submit`,
// `tune jobs`, `tune cancel`.
#include "server/cli.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "base/exit_code.h"
#include "base/table.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/grpcpp.h"
#include "measure/target.h"
#include "server/daemon.h"
#include "server/grpc_status.h"
#include "server/proto_convert.h"
#include "server/worker_agent.h"
#include "server/wire_names.h"
#include "tuner/model_file.h"
#include "tuner/parse_command_line.h"
#include "tuner/tuning_flags.h"
#include "tune/v1/tune.grpc.pb.h"

namespace tune::server {
namespace {

/// The shared token: from --token-file (first line, surrounding blanks removed) or else the
/// TUNE_TOKEN environment variable; "" when neither is given.
absl::StatusOr<std::string> LoadToken(const std::string& token_file) {
  std::string token;
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the token file ", token_file));
    std::getline(in, token);
    if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("the token file ", token_file, " is empty"));
  } else if (const char* env = std::getenv("TUNE_TOKEN")) {
    token = env;
  }
  while (!token.empty() && (token.back() == ' ' || token.back() == '\r' || token.back() == '\t')) token.pop_back();
  size_t start = token.find_first_not_of(" \t");
  token = start == std::string::npos ? "" : token.substr(start);
  for (char c : token)
    if (c < 0x21 || c > 0x7e) return absl::InvalidArgumentError("the token must be printable ASCII without spaces");
  return token;
}

bool IsLoopback(const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

int ServeCommand(int argc, char** argv) {
  CLI::App app{"tune serve: the tuning daemon (until SIGTERM or Ctrl-C)", "tune serve"};
  DaemonOptions o;
  std::string token_file;
  int max_message_mb = 16;
  app.add_option("--listen", o.listen, "HOST:PORT to listen on (port 0 = any free port)")->capture_default_str();
  app.add_option("--db", o.db_path, "record database file (created when absent)")->required();
  app.add_option("--token-file", token_file, "file whose first line is the shared token (else $TUNE_TOKEN)");
  app.add_option("--tls-cert", o.tls_cert_path, "PEM certificate: serve TLS (with --tls-key)");
  app.add_option("--tls-key", o.tls_key_path, "PEM private key of --tls-cert");
  app.add_option("--max-message-mb", max_message_mb, "largest accepted message, MiB")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--expire-after", o.expire_after_s, "seconds of silence after which a worker is dropped")
      ->check(CLI::Range(0.1, 3600.0))->capture_default_str();
  app.add_option("--max-batch-losses", o.max_batch_losses,
                 "times a batch's worker may die (or its lease run out) before its configs are recorded as failed")
      ->check(CLI::Range(1, 100))->capture_default_str();
  app.add_option("--retrain-every", o.retrain_every,
                 "keep an xgb cost model per target, retrained in the background after every N new records; "
                 "jobs without their own --cost-model start from it (0 = off)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))->capture_default_str();
  if (auto rc = tuner::ParseCommandLine(app, argc - 1, argv + 1)) return *rc;
  o.max_message_bytes = max_message_mb << 20;
  o.heartbeat_interval_s = o.expire_after_s / 5;
  auto token = LoadToken(token_file);
  if (!token.ok()) return base::Fail("tune", token.status());
  o.token = *token;
  if (auto s = ValidateListenAddress(o.listen); !s.ok()) return base::Fail("tune", s);
  if (o.token.empty() && !IsLoopback(o.listen))
    return base::Fail("tune", base::kExitUsage, "refusing to listen on " + o.listen +
                                " without a token: give --token-file or TUNE_TOKEN, or listen on 127.0.0.1");

  // SIGINT/SIGTERM are taken by sigwait below; block them before gRPC starts its threads so
  // that none of those threads receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  Daemon daemon(o);
  auto port = daemon.Start();
  if (!port.ok()) return base::Fail("tune", port.status());
  std::string host = o.listen.substr(0, o.listen.rfind(':'));
  std::printf("tune serve: listening on %s:%d, db %s, %s%s%s\n", host.c_str(), *port, o.db_path.c_str(),
              o.token.empty() ? "no token" : "token required", o.tls_cert_path.empty() ? "" : ", TLS",
              o.retrain_every > 0 ? absl::StrCat(", retraining each target's cost model every ", o.retrain_every,
                                                 " records").c_str()
                                  : "");
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::printf("tune serve: %s, shutting down\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  std::fflush(stdout);
  daemon.Shutdown(2);
  return 0;
}

/// Client options shared by the commands that talk to a daemon.
struct ClientFlags {
  std::string server = "127.0.0.1:7117";
  std::string token_file;
  std::string tls_ca;
  double timeout_s = 10;

  void Add(CLI::App& app) {
    app.add_option("--server", server, "daemon address HOST:PORT")->capture_default_str();
    app.add_option("--token-file", token_file, "file whose first line is the shared token (else $TUNE_TOKEN)");
    app.add_option("--tls-ca", tls_ca, "PEM root certificate: connect with TLS");
    app.add_option("--timeout", timeout_s, "seconds to wait for the daemon")->check(CLI::Range(0.1, 3600.0));
  }

  /// The root certificate's PEM text; "" without --tls-ca.
  absl::StatusOr<std::string> TlsRoots() const {
    if (tls_ca.empty()) return std::string();
    std::ifstream in(tls_ca, std::ios::binary);
    if (!in) return absl::InvalidArgumentError("cannot read the TLS root certificate " + tls_ca);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string token;  // set by TuneStub

  /// Reads the token and connects; the client stub of the Tune service.
  absl::StatusOr<std::unique_ptr<v1::Tune::Stub>> TuneStub() {
    auto t = LoadToken(token_file);
    if (!t.ok()) return t.status();
    token = *t;
    auto channel = Connect();
    if (!channel.ok()) return channel.status();
    return v1::Tune::NewStub(*channel);
  }

  /// Adds the token to a call and, for a unary call, the --timeout deadline.
  void Prepare(grpc::ClientContext& ctx, bool unary = true) const { AttachToken(ctx, token, unary ? timeout_s : 0); }

  absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect() const {
    auto roots = TlsRoots();
    if (!roots.ok()) return roots.status();
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (!roots->empty()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = *roots;
      creds = grpc::SslCredentials(ssl);
    }
    return grpc::CreateChannel(server, creds);
  }
};

std::atomic<int> g_stop_signal{0};
/// The first SIGINT/SIGTERM asks the worker to stop (within its --stop-grace); a second one
/// ends it at once (its measuring children die with it).
void OnStopSignal(int sig) {
  if (g_stop_signal.exchange(sig) != 0) {
    static constexpr char kMessage[] = "tune worker: second signal, exiting now\n";
    (void)!::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    ::_exit(128 + sig);
  }
}

/// "tune worker: X" -> "tune worker: [cuda:I] X", "tune: X" -> "tune: [cuda:I] X".
std::string Tagged(const std::string& line, const std::string& tag) {
  for (const char* head : {"tune worker: ", "tune: "}) {
    if (line.rfind(head, 0) == 0) return absl::StrCat(head, "[", tag, "] ", line.substr(std::strlen(head)));
  }
  return absl::StrCat("[", tag, "] ", line);
}

/// Copies the lines read from `fd` to `out`, tagged, until the writer closes it; closes `fd`.
void ForwardLines(int fd, FILE* out, const std::string& tag) {
  std::string pending;
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
      const std::string line = Tagged(pending.substr(0, nl), tag) + "\n";
      std::fwrite(line.data(), 1, line.size(), out);
      std::fflush(out);
    }
  }
  if (!pending.empty()) {
    const std::string line = Tagged(pending, tag) + "\n";
    std::fwrite(line.data(), 1, line.size(), out);
    std::fflush(out);
  }
  ::close(fd);
}

/// One `tune worker --target cuda:I --slots 1` process of a `tune worker` with several agents.
struct GpuWorkerProcess {
  std::string target;
  pid_t pid = -1;
  int exit_code = -1;  // -1 while it runs
  std::thread out, err;
};

/// Runs each of `agents` as a `tune worker` process of this executable: its own process group
/// (a terminal's Ctrl-C reaches this process only, which passes one SIGTERM on), killed with
/// this process (PR_SET_PDEATHSIG), its output lines tagged with its target. A stop (`stop`
/// turns true) is passed on as SIGTERM; a worker that ends before a stop stops the others.
/// Returns 0 once all ended after a stop, else the first failing worker's exit code.
int RunGpuWorkerProcesses(const std::vector<WorkerAgentOptions>& agents, const ClientFlags& flags,
                          const std::function<bool()>& stop) {
  char exe[4096] = {};
  const ssize_t len = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) return base::Fail("tune", base::kExitFailure, "tune worker: cannot find the tune executable");
  std::vector<GpuWorkerProcess> procs(agents.size());
  for (size_t i = 0; i < agents.size(); ++i) {
    const WorkerAgentOptions& a = agents[i];
    std::vector<std::string> args = {exe, "worker", "--server", a.server, "--target", a.target, "--name", a.name,
                                     "--threads", absl::StrCat(a.threads), "--build-threads",
                                     absl::StrCat(a.build_threads), "--stop-grace", absl::StrCat(a.stop_grace_s),
                                     "--slots", absl::StrCat(a.slots)};
    if (!flags.token_file.empty()) args.insert(args.end(), {"--token-file", flags.token_file});
    if (!flags.tls_ca.empty()) args.insert(args.end(), {"--tls-ca", flags.tls_ca});
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    int out_pipe[2], err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
      return base::Fail("tune", base::kExitFailure, absl::StrCat("tune worker: pipe: ", std::strerror(errno)));
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) return base::Fail("tune", base::kExitFailure, absl::StrCat("tune worker: fork: ", std::strerror(errno)));
    if (pid == 0) {  // only async-signal-safe calls until exec
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::setpgid(0, 0);
      ::dup2(out_pipe[1], STDOUT_FILENO);
      ::dup2(err_pipe[1], STDERR_FILENO);
      ::execv(exe, argv.data());
      ::_exit(127);
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    GpuWorkerProcess& p = procs[i];
    // Tagged with the target, and the slot where a GPU has several (the name's "/S").
    const std::string tag = absl::StrCat(a.target, a.name.ends_with("/" + a.target) ? "" : a.name.substr(a.name.rfind('/')));
    p.target = a.target;
    p.pid = pid;
    p.out = std::thread(ForwardLines, out_pipe[0], stdout, tag);
    p.err = std::thread(ForwardLines, err_pipe[0], stderr, tag);
  }
  int first_error = 0;
  bool stopping = false;
  for (size_t running = procs.size(); running > 0;) {
    if (!stopping && stop()) {
      stopping = true;
      for (GpuWorkerProcess& p : procs)
        if (p.exit_code < 0) ::kill(p.pid, SIGTERM);
    }
    for (GpuWorkerProcess& p : procs) {
      int status = 0;
      if (p.exit_code >= 0 || ::waitpid(p.pid, &status, WNOHANG) != p.pid) continue;
      p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      --running;
      if (stopping) continue;
      // Ended by itself (a wrong token, a protocol mismatch, a GPU that cannot be opened):
      // the others stop too, and its exit code is the command's.
      first_error = p.exit_code != 0 ? p.exit_code : base::kExitFailure;
      stopping = true;
      for (GpuWorkerProcess& q : procs)
        if (q.exit_code < 0) ::kill(q.pid, SIGTERM);
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (GpuWorkerProcess& p : procs) {
    p.out.join();
    p.err.join();
  }
  return first_error;
}

int WorkerCommand(int argc, char** argv) {
  CLI::App app{"tune worker: measures batches leased by a daemon on this host's device; with --target cuda:all, "
               "on every GPU of this host (--slots workers per GPU, each measuring in its own child process)",
               "tune worker"};
  ClientFlags flags;
  flags.Add(app);
  WorkerAgentOptions o;
  app.add_option("--target", o.target,
                 "device to measure on: llvm, cuda[:N] (GPU N, default 0) or cuda:all (every GPU of this host, "
                 "registered as one worker per GPU)")
      ->capture_default_str();
  app.add_option("--name", o.name, "name shown by `tune workers` (default HOST/TARGET; with several GPUs or slots NAME/cuda:N[/SLOT])");
  app.add_option("--threads", o.threads, "kernel threads on the CPU target (0 = all cores)")->check(CLI::Range(0, 4096));
  app.add_option("--build-threads", o.build_threads,
                 "threads compiling a batch's kernels (0 = all cores; with cuda:all, each GPU's share)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--stop-grace", o.stop_grace_s,
                 "seconds a stop (SIGTERM, Ctrl-C) waits for the batch in hand to finish and be acknowledged; "
                 "then the batch is given back unmeasured")
      ->check(CLI::Range(0.0, 3600.0))->capture_default_str();
  app.add_option("--slots", o.slots,
                 absl::StrCat("workers per GPU, a process each: one compiles its batch while another measures, the GPU's "
                              "lock keeping their measurements apart (0 = ", kDefaultGpuSlots,
                              " on a cuda target, 1 on llvm; more than 1 needs a cuda target)"))
      ->check(CLI::Range(0, 64))->capture_default_str();
  if (auto rc = tuner::ParseCommandLine(app, argc - 1, argv + 1)) return *rc;
  auto token = LoadToken(flags.token_file);
  if (!token.ok()) return base::Fail("tune", token.status());
  auto roots = flags.TlsRoots();
  if (!roots.ok()) return base::Fail("tune", roots.status());
  o.server = flags.server;
  o.token = *token;
  o.tls_ca_pem = *roots;
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  auto event = [](const std::string& line) {
    std::printf("tune worker: %s\n", base::EscapeControl(line).c_str());
    std::fflush(stdout);
  };
  auto stop = [] { return g_stop_signal.load() != 0; };
  // One agent per GPU and slot (PerDeviceAgents); several run as a `tune worker` process each,
  // so each forks its measuring children from a process of its own.
  const bool all = measure::Target::IsAllGpus(o.target);
  if (!all) {  // a bad or missing device is said once, before any process starts
    absl::StatusOr<measure::Target> target = measure::Target::Parse(o.target, 1);
    if (!target.ok()) return base::Fail("tune", target.status());
  }
  absl::StatusOr<int> count = all ? measure::Target::CudaDeviceCount() : absl::StatusOr<int>(1);
  absl::StatusOr<std::vector<WorkerAgentOptions>> agents =
      count.ok() ? PerDeviceAgents(o, *count, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())))
                 : absl::StatusOr<std::vector<WorkerAgentOptions>>(count.status());
  if (!agents.ok()) {
    return base::Fail("tune", absl::Status(agents.status().code(),
                                           absl::StrCat(all ? "cuda:all: " : "", agents.status().message())));
  }
  int rc = 0;
  if (agents->size() > 1) {
    const size_t gpus = all ? static_cast<size_t>(*count) : 1;
    event(absl::StrCat(o.target, ": ", gpus, " GPU(s), ", agents->size() / gpus, " slot(s) each, one worker process per slot"));
    rc = RunGpuWorkerProcesses(*agents, flags, stop);
  } else {
    absl::Status st = RunWorkerAgent(agents->front(), stop, event);
    rc = st.ok() ? 0 : base::Fail("tune", st);
  }
  // An abandoned batch may still be measured on a thread of its own: end the process without
  // running destructors under it.
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(rc);
}

/// `tune workers` / `tune jobs`: parses the client flags, makes one unary call `call` on the
/// daemon's Tune service and prints the table `rows` makes of its reply under `header`
/// (`none` when it has no rows).
template <typename Request, typename Reply>
int ListCommand(int argc, char** argv, const char* about, const char* name,
                grpc::Status (v1::Tune::Stub::*call)(grpc::ClientContext*, const Request&, Reply*),
                const std::vector<std::string>& header, const char* none,
                const std::function<std::vector<std::vector<std::string>>(const Reply&)>& rows) {
  CLI::App app{about, name};
  ClientFlags flags;
  flags.Add(app);
  if (auto rc = tuner::ParseCommandLine(app, argc - 1, argv + 1)) return *rc;
  auto stub = flags.TuneStub();
  if (!stub.ok()) return base::Fail("tune", stub.status());
  grpc::ClientContext ctx;
  flags.Prepare(ctx);
  Reply reply;
  grpc::Status st = ((**stub).*call)(&ctx, Request(), &reply);
  if (!st.ok()) return base::Fail("tune", FromGrpcStatus(st, "daemon at " + flags.server));
  const std::vector<std::vector<std::string>> table = rows(reply);
  // Ids right-aligned, names and states left, numbers right.
  base::PrintTable(header, table,
                   {{base::Align::kRight, base::Align::kLeft, base::Align::kLeft, base::Align::kLeft, base::Align::kLeft}});
  if (table.empty()) std::printf("%s\n", none);
  return 0;
}

int WorkersCommand(int argc, char** argv) {
  return ListCommand<v1::ListWorkersRequest, v1::ListWorkersReply>(
      argc, argv, "tune workers: the worker agents a daemon knows", "tune workers", &v1::Tune::Stub::ListWorkers,
      {"id", "name", "host", "target", "state", "last seen", "results", "batches", "crashes"}, "(no workers)",
      [](const v1::ListWorkersReply& reply) {
        std::vector<std::vector<std::string>> rows;
        for (const auto& w : reply.workers()) {
          rows.push_back({absl::StrCat(w.worker_id()), w.name(), w.host(), w.target(), WorkerStateName(w.state()),
                          absl::StrFormat("%.1fs", w.last_seen_s()), absl::StrCat(w.results()),
                          absl::StrCat(w.batches()), absl::StrCat(w.crashes())});
        }
        return rows;
      });
}

std::string Ms(double s) { return s > 0 ? absl::StrCat(absl::SixDigits(s * 1e3)) : "-"; }

int SubmitCommand(int argc, char** argv) {
  CLI::App app{"tune submit: a tuning job run by a daemon on its workers, progress streamed back", "tune submit"};
  ClientFlags flags;
  flags.Add(app);
  std::string model, target = "llvm", name;
  tuner::TuningFlags tuning;
  bool detach = false;
  double reattach_s = 300;
  app.add_option("model", model, "built-in model name, a JSON model file or an ONNX model (imported here)")->required();
  app.add_option("--target", target, "llvm or cuda[:N]: the workers that measure it")->capture_default_str();
  // --timeout is the wait for the daemon (ClientFlags); a candidate's measurement timeout is
  // --measure-timeout here.
  tuner::AddTuningFlags(app, tuning, "--measure-timeout");
  app.add_option("--name", name, "shown by tune jobs");
  std::string layout = "nchw";
  tuner::AddLayoutFlag(app, layout,
                       "the convolutions' NCHWc workloads, blocked by this machine's vector width (the model is "
                       "resolved here and sent as a model file)");
  app.add_flag("--detach", detach, "print the job id and return without watching");
  app.add_option("--reattach", reattach_s, "seconds to keep reattaching to the job when the daemon goes away")
      ->check(CLI::Range(0.0, 86400.0))->capture_default_str();
  if (auto rc = tuner::ParseCommandLine(app, argc - 1, argv + 1)) return *rc;
  v1::SubmitJobRequest req;
  tuning.target_family = target.substr(0, target.find(':'));  // a --cost-model FILE.tcm must be of this family
  if (absl::Status st = SetTuningFlags(tuning, &req); !st.ok()) return base::Fail("tune", st);
  auto stub_or = flags.TuneStub();
  if (!stub_or.ok()) return base::Fail("tune", stub_or.status());
  auto stub = std::move(*stub_or);

  std::ifstream file(model);
  std::error_code ec;  // a path that cannot be examined is not a model file
  const absl::StatusOr<int64_t> layout_block = tuner::LayoutBlock(layout, target);
  if (!layout_block.ok()) return base::Fail("tune", layout_block.status());
  if (tuner::IsOnnxModel(model) || !tuning.inputs.empty() || *layout_block > 0) {
    // An ONNX model is imported here, and a blocked layout planned here; the tasks travel as a
    // model file.
    auto m = tuner::LoadModel(model, tuning.inputs, *layout_block);
    if (!m.ok()) return base::Fail("tune", m.status());
    if (!m->summary.empty()) std::fprintf(stderr, "%s\n", base::EscapeControl(m->summary).c_str());
    req.set_model_json(tuner::ModelToJson(*m));
    if (name.empty()) name = model;
  } else if (std::filesystem::is_regular_file(model, ec) && file) {  // a model file: its contents travel
    std::ostringstream text;
    text << file.rdbuf();
    req.set_model_json(text.str());
    if (name.empty()) name = model;
  } else {
    req.set_zoo_name(model);
  }
  req.set_target(target);
  req.set_name(name);
  v1::SubmitJobReply reply;
  {
    grpc::ClientContext ctx;
    flags.Prepare(ctx);
    grpc::Status st = stub->SubmitJob(&ctx, req, &reply);
    if (!st.ok()) return base::Fail("tune", FromGrpcStatus(st, "daemon at " + flags.server));
  }
  std::printf("job %llu submitted to %s\n", static_cast<unsigned long long>(reply.job_id()), flags.server.c_str());
  std::fflush(stdout);
  if (detach) return 0;

  // Watches until the job ends. When the daemon goes away (restarted, say) the job resumes
  // there from the database: reattach to it, retrying with backoff for --reattach seconds.
  v1::WatchJobRequest watch;
  watch.set_job_id(reply.job_id());
  v1::JobEvent last;
  uint32_t shown = ~0u;
  bool finished = false;
  double backoff = 0.2, lost_since = -1;
  while (!finished) {
    grpc::ClientContext ctx;
    flags.Prepare(ctx, /*unary=*/false);
    auto reader = stub->WatchJob(&ctx, watch);
    v1::JobEvent e;
    bool got = false;
    while (reader->Read(&e)) {
      got = true;
      last = e;
      finished = IsFinished(e.state());
      if (e.trials_done() != shown || finished) {
        shown = e.trials_done();
        double best_total = 0;
        for (const auto& t : e.tasks()) best_total += t.best_s() * t.count();
        std::printf("[job %llu] %-9s trials %5u/%-5u  est. model %s ms  elapsed %.0fs  ETA %.0fs\n",
                    static_cast<unsigned long long>(e.job_id()), JobStateName(e.state()), e.trials_done(),
                    e.trials_total(), Ms(best_total).c_str(), e.elapsed_s(), e.eta_s());
        std::fflush(stdout);
      }
    }
    grpc::Status st = reader->Finish();
    if (finished) break;
    // A restarted daemon may answer before it has relaunched the job: NOT_FOUND after a loss
    // is retried too.
    const bool transient = st.ok() || st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           st.error_code() == grpc::StatusCode::CANCELLED ||
                           (st.error_code() == grpc::StatusCode::NOT_FOUND && lost_since >= 0);
    if (!transient) return base::Fail("tune", FromGrpcStatus(st, "daemon at " + flags.server));
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    if (got || lost_since < 0) {
      lost_since = now;
      backoff = 0.2;
      std::printf("[job %llu] lost the daemon (%s); reattaching for up to %.0f s\n",
                  static_cast<unsigned long long>(reply.job_id()),
                  st.ok() ? "stream ended" : base::EscapeControl(st.error_message()).c_str(), reattach_s);
      std::fflush(stdout);
    }
    if (now - lost_since > reattach_s)
      return base::Fail("tune", base::kExitFailure, absl::StrCat("the daemon at ", flags.server, " did not come back within ", reattach_s,
                                             " s; job ", reply.job_id(), " resumes when it does (see tune jobs)"));
    std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
    backoff = std::min(backoff * 2, 5.0);
  }
  std::vector<std::vector<std::string>> rows;
  double best_sum = 0, default_sum = 0;
  for (const auto& t : last.tasks()) {
    rows.push_back({t.workload_key(), absl::StrCat(t.count()), absl::StrCat(t.trials()), absl::StrCat(t.ok()),
                    Ms(t.best_s()), Ms(t.default_s()),
                    absl::StrFormat("%.2fx", t.best_s() > 0 ? t.default_s() / t.best_s() : 0.0)});
    best_sum += t.best_s() * t.count();
    default_sum += t.default_s() * t.count();
  }
  std::printf("\n");
  base::PrintTable({"task", "count", "trials", "ok", "best ms", "default ms", "speedup"}, rows);
  std::printf("\nestimated model latency (sum of best x count): %s ms; untuned default: %s ms\n",
              Ms(best_sum).c_str(), Ms(default_sum).c_str());
  std::printf("job %llu %s%s%s\n", static_cast<unsigned long long>(last.job_id()), JobStateName(last.state()),
              last.message().empty() ? "" : ": ", base::EscapeControl(last.message()).c_str());
  if (last.state() == v1::JOB_DONE) return 0;
  return last.state() == v1::JOB_CANCELLED ? 130 : base::kExitFailure;
}

int JobsCommand(int argc, char** argv) {
  return ListCommand<v1::ListJobsRequest, v1::ListJobsReply>(
      argc, argv, "tune jobs: the jobs a daemon knows", "tune jobs", &v1::Tune::Stub::ListJobs,
      {"id", "name", "model", "target", "state", "trials", "note"}, "(no jobs)", [](const v1::ListJobsReply& reply) {
        std::vector<std::vector<std::string>> rows;
        for (const auto& j : reply.jobs()) {
          rows.push_back({absl::StrCat(j.job_id()), j.name(), j.model(), j.target(), JobStateName(j.state()),
                          absl::StrCat(j.trials_done(), "/", j.trials_total()), j.note()});
        }
        return rows;
      });
}

int CancelCommand(int argc, char** argv) {
  CLI::App app{"tune cancel: ends a daemon's job at once, queued or running (its leased batches are revoked)",
               "tune cancel"};
  ClientFlags flags;
  flags.Add(app);
  uint64_t job_id = 0;
  app.add_option("job", job_id, "the job's id (see tune jobs)")->required();
  if (auto rc = tuner::ParseCommandLine(app, argc - 1, argv + 1)) return *rc;
  auto stub = flags.TuneStub();
  if (!stub.ok()) return base::Fail("tune", stub.status());
  grpc::ClientContext ctx;
  flags.Prepare(ctx);
  v1::CancelJobRequest req;
  req.set_job_id(job_id);
  v1::CancelJobReply reply;
  grpc::Status st = (*stub)->CancelJob(&ctx, req, &reply);
  if (!st.ok()) return base::Fail("tune", FromGrpcStatus(st, "daemon at " + flags.server));
  if (reply.state() == v1::JOB_CANCELLED)
    std::printf("job %llu cancelled\n", static_cast<unsigned long long>(job_id));
  else
    std::printf("job %llu had already ended: %s\n", static_cast<unsigned long long>(job_id),
                JobStateName(reply.state()));
  return 0;
}

}  // namespace

bool IsServerCommand(int argc, char** argv) {
  if (argc < 2) return false;
  std::string c = argv[1];
  return c == "serve" || c == "workers" || c == "worker" || c == "submit" || c == "jobs" || c == "cancel";
}

int RunServerCli(int argc, char** argv) {
  std::string c = argv[1];
  if (c == "serve") return ServeCommand(argc, argv);
  if (c == "worker") return WorkerCommand(argc, argv);
  if (c == "submit") return SubmitCommand(argc, argv);
  if (c == "jobs") return JobsCommand(argc, argv);
  if (c == "cancel") return CancelCommand(argc, argv);
  return WorkersCommand(argc, argv);
}

}  // namespace tune::server
