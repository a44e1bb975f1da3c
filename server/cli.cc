// `tune serve` (the daemon until SIGTERM), `tune worker` (a device agent), `tune workers`.
#include "server/cli.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "server/daemon.h"
#include "server/grpc_status.h"
#include "server/worker_agent.h"
#include "server/worker_registry.h"
#include "tune/v1/tune.grpc.pb.h"

namespace tune::server {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "tune: %s\n", message.c_str());
  return code;
}

int Fail(const absl::Status& st) {
  bool input = absl::IsInvalidArgument(st) || absl::IsNotFound(st) || absl::IsFailedPrecondition(st) ||
               absl::IsUnauthenticated(st) || absl::IsPermissionDenied(st);
  return Fail(input ? kExitUsage : kExitFailure, std::string(st.message()));
}

std::optional<int> Parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    for (auto& ch : what)
      if (ch == '\n') ch = ' ';
    return Fail(kExitUsage, what + " (see tune " + app.get_name() + " --help)");
  }
  return std::nullopt;
}

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
  CLI::App app{"tune serve: the tuning daemon (until SIGTERM or Ctrl-C)", "serve"};
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
  if (auto rc = Parse(app, argc - 1, argv + 1)) return *rc;
  o.max_message_bytes = max_message_mb << 20;
  o.heartbeat_interval_s = o.expire_after_s / 5;
  auto token = LoadToken(token_file);
  if (!token.ok()) return Fail(token.status());
  o.token = *token;
  if (auto s = ValidateListenAddress(o.listen); !s.ok()) return Fail(s);
  if (o.token.empty() && !IsLoopback(o.listen))
    return Fail(kExitUsage, "refusing to listen on " + o.listen +
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
  if (!port.ok()) return Fail(port.status());
  std::string host = o.listen.substr(0, o.listen.rfind(':'));
  std::printf("tune serve: listening on %s:%d, db %s, %s%s\n", host.c_str(), *port, o.db_path.c_str(),
              o.token.empty() ? "no token" : "token required", o.tls_cert_path.empty() ? "" : ", TLS");
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
void OnStopSignal(int sig) { g_stop_signal.store(sig); }

int WorkerCommand(int argc, char** argv) {
  CLI::App app{"tune worker: measures batches leased by a daemon on this host's device", "worker"};
  ClientFlags flags;
  flags.Add(app);
  WorkerAgentOptions o;
  app.add_option("--target", o.target, "device to measure on: llvm or cuda[:N]")->capture_default_str();
  app.add_option("--name", o.name, "name shown by `tune workers` (default HOST/TARGET)");
  app.add_option("--threads", o.threads, "kernel threads on the CPU target (0 = all cores)")->check(CLI::Range(0, 4096));
  if (auto rc = Parse(app, argc - 1, argv + 1)) return *rc;
  auto token = LoadToken(flags.token_file);
  if (!token.ok()) return Fail(token.status());
  auto roots = flags.TlsRoots();
  if (!roots.ok()) return Fail(roots.status());
  o.server = flags.server;
  o.token = *token;
  o.tls_ca_pem = *roots;
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  absl::Status st = RunWorkerAgent(
      o, [] { return g_stop_signal.load() != 0; },
      [](const std::string& line) {
        std::printf("tune worker: %s\n", line.c_str());
        std::fflush(stdout);
      });
  if (!st.ok()) return Fail(st);
  return 0;
}

int WorkersCommand(int argc, char** argv) {
  CLI::App app{"tune workers: the worker agents a daemon knows", "workers"};
  ClientFlags flags;
  flags.Add(app);
  if (auto rc = Parse(app, argc - 1, argv + 1)) return *rc;
  auto token = LoadToken(flags.token_file);
  if (!token.ok()) return Fail(token.status());
  auto channel = flags.Connect();
  if (!channel.ok()) return Fail(channel.status());
  auto stub = v1::Tune::NewStub(*channel);
  grpc::ClientContext ctx;
  AttachToken(ctx, *token);
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000)));
  v1::ListWorkersReply reply;
  grpc::Status st = stub->ListWorkers(&ctx, v1::ListWorkersRequest(), &reply);
  if (!st.ok()) return Fail(FromGrpcStatus(st, "daemon at " + flags.server));
  std::printf("%-4s  %-20s  %-16s  %-8s  %-12s  %9s  %8s  %8s  %7s\n", "id", "name", "host", "target", "state",
              "last seen", "results", "batches", "crashes");
  for (const auto& w : reply.workers()) {
    const char* state = w.state() == v1::WORKER_IDLE          ? "idle"
                        : w.state() == v1::WORKER_BUSY        ? "busy"
                        : w.state() == v1::WORKER_QUARANTINED ? "quarantined"
                        : w.state() == v1::WORKER_EXPIRED     ? "expired"
                                                              : "?";
    std::printf("%-4llu  %-20s  %-16s  %-8s  %-12s  %8.1fs  %8llu  %8llu  %7u\n",
                static_cast<unsigned long long>(w.worker_id()), w.name().c_str(), w.host().c_str(),
                w.target().c_str(), state, w.last_seen_s(), static_cast<unsigned long long>(w.results()),
                static_cast<unsigned long long>(w.batches()), w.crashes());
  }
  if (reply.workers().empty()) std::printf("(no workers)\n");
  return 0;
}

}  // namespace

bool IsServerCommand(int argc, char** argv) {
  if (argc < 2) return false;
  std::string c = argv[1];
  return c == "serve" || c == "workers" || c == "worker";
}

int RunServerCli(int argc, char** argv) {
  std::string c = argv[1];
  if (c == "serve") return ServeCommand(argc, argv);
  if (c == "worker") return WorkerCommand(argc, argv);
  return WorkersCommand(argc, argv);
}

}  // namespace tune::server
