// `tune worker` against a real `tune serve` on loopback: registration, expiry after SIGTERM,
// waiting for a daemon that is not up yet, re-registering after a daemon restart, a wrong token.
#include <signal.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "measure/target.h"
#include "server/worker_agent.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tests/server/serve_helper.h"

namespace tune::test {
namespace {

constexpr char kToken[] = "worker-test-token";

class WorkerProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFileBytes(dir_.Join("token"), std::string(kToken) + "\n");
    port_ = std::to_string(FreePort());
    address_ = "127.0.0.1:" + port_;
  }

  /// The daemon started before anything knows its address: on a port free at that moment
  /// (port_ and address_ follow it).
  bool ServeFirst(Subprocess& serve, const std::vector<std::string>& flags) {
    port_ = StartServeOnFreePort(serve, dir_, "serve", &address_, flags);
    if (port_.empty()) ADD_FAILURE() << ReadFileBytes(dir_.Join("serve.err"));
    return !port_.empty();
  }

  std::vector<std::string> ServeFlags() const {
    return {"--db", dir_.Join("r.db"), "--token-file", dir_.Join("token"), "--expire-after", "1"};
  }

  bool StartWorker(Subprocess& p, const std::string& name, const std::string& token_file) {
    return p.Start({TuneBinary(), "worker", "--server", address_, "--target", "llvm", "--threads", "1", "--name",
                    name, "--token-file", token_file},
                   dir_.path(), dir_.Join(name + ".out"), dir_.Join(name + ".err"));
  }

  /// `tune workers` output.
  ProcessResult Workers() {
    return RunProcess({TuneBinary(), "workers", "--server", address_, "--token-file", dir_.Join("token")},
                      dir_.path(), 60);
  }

  TempDir dir_;
  std::string port_, address_;
};

TEST_F(WorkerProcess, RegistersIsListedAndIsGoneAtOnceAfterSigterm) {
  Subprocess serve, worker;
  ASSERT_TRUE(ServeFirst(serve, ServeFlags())) << ReadFileBytes(dir_.Join("serve.err"));
  ASSERT_TRUE(StartWorker(worker, "w-one", dir_.Join("token")));
  ASSERT_FALSE(WaitForMatch(dir_.Join("w-one.out"), "registered as worker 1").empty())
      << ReadFileBytes(dir_.Join("w-one.err"));
  ProcessResult list = Workers();
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_NE(list.out.find("w-one"), std::string::npos) << list;
  EXPECT_NE(list.out.find("idle"), std::string::npos) << list;

  worker.Kill(SIGTERM);
  const ProcessResult& r = worker.Wait();
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 0);
  // It said goodbye: listed as gone at once, not idle until it expires.
  ProcessResult gone = Workers();
  EXPECT_TRUE(std::regex_search(gone.out, std::regex("w-one .* gone "))) << gone;
  EXPECT_EQ(gone.out.find("idle"), std::string::npos) << gone;
}

// Two workers; one leaves cleanly; a job's round is split over the other and a third that
// then freezes (SIGSTOP) holding its half, so the Ack of the other half never comes. A SIGTERM
// while the other measures still ends it within its stop grace; a second signal ends a
// worker at once.
TEST_F(WorkerProcess, SigtermEndsAWorkerInBoundedTimeWhateverItWaitsFor) {
  WriteFileBytes(dir_.Join("one.json"), R"({"name": "one", "layers": [
      {"name": "mm", "op": "matmul", "shape": "192,192,192"}]})");
  Subprocess serve, leaver, frozen, measuring;
  ASSERT_TRUE(ServeFirst(serve, {"--db", dir_.Join("r.db"), "--token-file", dir_.Join("token"), "--expire-after", "600"}));
  ASSERT_TRUE(StartWorker(leaver, "leaver", dir_.Join("token")));
  ASSERT_FALSE(WaitForMatch(dir_.Join("leaver.out"), "registered as worker").empty());
  leaver.Kill(SIGTERM);
  EXPECT_EQ(leaver.Wait().exit_code, 0);
  ASSERT_TRUE(frozen.Start({TuneBinary(), "worker", "--server", address_, "--target", "llvm", "--threads", "1",
                            "--name", "frozen", "--token-file", dir_.Join("token")},
                           dir_.path(), dir_.Join("frozen.out"), dir_.Join("frozen.err")));
  ASSERT_TRUE(measuring.Start({TuneBinary(), "worker", "--server", address_, "--target", "llvm", "--threads", "1",
                               "--name", "measuring", "--token-file", dir_.Join("token"), "--stop-grace", "1"},
                              dir_.path(), dir_.Join("measuring.out"), dir_.Join("measuring.err")));
  ASSERT_FALSE(WaitForMatch(dir_.Join("frozen.out"), "registered as worker").empty());
  ASSERT_FALSE(WaitForMatch(dir_.Join("measuring.out"), "registered as worker").empty());
  ProcessResult submit = RunProcess({TuneBinary(), "submit", dir_.Join("one.json"), "--server", address_,
                                     "--token-file", dir_.Join("token"), "--trials", "16", "--batch", "8",
                                     "--strategy", "random", "--detach"},
                                    dir_.path(), 60);
  ASSERT_EQ(submit.exit_code, 0) << submit;
  // A search round: four configs each.
  ASSERT_FALSE(WaitForMatch(dir_.Join("frozen.out"), "batch [0-9]+: 4 configs", 120).empty())
      << ReadFileBytes(dir_.Join("frozen.out"));
  frozen.Kill(SIGSTOP);
  ASSERT_FALSE(WaitForMatch(dir_.Join("measuring.out"), "batch [0-9]+: 4 configs", 120).empty())
      << ReadFileBytes(dir_.Join("measuring.out"));
  measuring.Kill(SIGTERM);
  // Bounded: the grace (1 s) and the RPC deadlines; 60 s is only the test's safety limit.
  for (int i = 0; i < 600 && !measuring.Finished(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(measuring.Finished()) << ReadFileBytes(dir_.Join("measuring.out"));
  EXPECT_TRUE(measuring.result().exited);
  EXPECT_EQ(measuring.result().exit_code, 0);
  const std::string out = ReadFileBytes(dir_.Join("measuring.out"));
  EXPECT_TRUE(std::regex_search(out, std::regex("stopping: (batch [0-9]+ (finished and returned|abandoned)|"
                                                "leaving without the Ack)")))
      << out;
  ProcessResult list = Workers();
  EXPECT_TRUE(std::regex_search(list.out, std::regex("measuring .* gone "))) << list;
  EXPECT_TRUE(std::regex_search(list.out, std::regex("leaver .* gone "))) << list;

  // A frozen worker that is told twice ends at once.
  frozen.Kill(SIGCONT);
  frozen.Kill(SIGTERM);
  frozen.Kill(SIGTERM);
  for (int i = 0; i < 600 && !frozen.Finished(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(frozen.Finished());
  EXPECT_TRUE(frozen.result().exited);
  EXPECT_TRUE(frozen.result().exit_code == 0 || frozen.result().exit_code == 128 + SIGTERM)
      << frozen.result().exit_code;
}

TEST_F(WorkerProcess, WaitsForTheDaemonAndRegistersAgainAfterARestart) {
  Subprocess worker;
  ASSERT_TRUE(StartWorker(worker, "w-early", dir_.Join("token")));
  ASSERT_FALSE(WaitForMatch(dir_.Join("w-early.out"), "unreachable").empty());
  {
    Subprocess serve;
    ASSERT_EQ(StartServe(serve, dir_, "serve1", address_, ServeFlags()), port_);
    ASSERT_FALSE(WaitForMatch(dir_.Join("w-early.out"), "registered as worker 1").empty());
    serve.Kill(SIGKILL);
    serve.Wait();
  }
  Subprocess serve2;
  ASSERT_EQ(StartServe(serve2, dir_, "serve2", address_, ServeFlags()), port_);
  // The new daemon has a fresh registry: the worker notices and registers again.
  ASSERT_FALSE(WaitForMatch(dir_.Join("w-early.out"), "registered as worker 1[^]*registered as worker 1").empty())
      << ReadFileBytes(dir_.Join("w-early.out"));
  EXPECT_FALSE(worker.Finished());
  worker.Kill(SIGTERM);
  EXPECT_EQ(worker.Wait().exit_code, 0);
}

// `--target cuda:all --slots 1` for N GPUs: N agents, one per ordinal, each a worker of its
// own with a distinct name and its share of the cores for compiling; everything else as given.
TEST(PerDeviceAgents, CudaAllMakesOneAgentPerGpu) {
  server::WorkerAgentOptions o;
  o.server = "10.0.0.7:7117";
  o.token = "t0k3n";
  o.target = "cuda:all";
  o.stop_grace_s = 3.5;
  o.slots = 1;
  for (const std::string& name : {std::string(), std::string("rack4")}) {
    o.name = name;
    for (int n : {1, 2, 4}) {
      absl::StatusOr<std::vector<server::WorkerAgentOptions>> agents = server::PerDeviceAgents(o, n, 16);
      ASSERT_TRUE(agents.ok()) << agents.status();
      ASSERT_EQ(agents->size(), static_cast<size_t>(n));
      std::set<std::string> names;
      for (int i = 0; i < n; ++i) {
        const server::WorkerAgentOptions& a = (*agents)[i];
        EXPECT_EQ(a.target, "cuda:" + std::to_string(i));
        EXPECT_FALSE(measure::Target::IsAllGpus(a.target));
        EXPECT_TRUE(a.name.ends_with("/cuda:" + std::to_string(i))) << a.name;
        if (!name.empty()) EXPECT_EQ(a.name, name + "/cuda:" + std::to_string(i));
        EXPECT_TRUE(names.insert(a.name).second) << a.name;
        EXPECT_EQ(a.build_threads, 16 / n);
        EXPECT_EQ(a.slots, 1);
        EXPECT_EQ(a.server, o.server);
        EXPECT_EQ(a.token, o.token);
        EXPECT_EQ(a.stop_grace_s, o.stop_grace_s);
      }
    }
  }
  // More GPUs than cores: each still compiles on one thread; a given thread count is kept.
  EXPECT_EQ((*server::PerDeviceAgents(o, 4, 2))[3].build_threads, 1);
  o.build_threads = 5;
  EXPECT_EQ((*server::PerDeviceAgents(o, 2, 16))[1].build_threads, 5);
  // No GPU: refused; a single device or the CPU with one slot: the options themselves.
  EXPECT_EQ(server::PerDeviceAgents(o, 0, 16).status().code(), absl::StatusCode::kUnavailable);
  for (const char* one : {"cuda:1", "cuda", "llvm"}) {
    o.target = one;
    absl::StatusOr<std::vector<server::WorkerAgentOptions>> same = server::PerDeviceAgents(o, 4, 16);
    ASSERT_TRUE(same.ok()) << one;
    ASSERT_EQ(same->size(), 1u);
    EXPECT_EQ((*same)[0].target, one);
    EXPECT_EQ((*same)[0].name, "rack4");
  }
}

// Slots: S workers per GPU, each a process of its own with a distinct name (NAME/cuda:I/S)
// and the GPU's whole share of the cores (its slots take turns compiling); by default
// kDefaultGpuSlots on a cuda target and one on the CPU, where several are refused.
TEST(PerDeviceAgents, SlotsMakeSeveralWorkersPerGpu) {
  server::WorkerAgentOptions o;
  o.target = "cuda:all";
  o.name = "rack4";
  o.slots = 3;
  absl::StatusOr<std::vector<server::WorkerAgentOptions>> agents = server::PerDeviceAgents(o, 2, 16);
  ASSERT_TRUE(agents.ok()) << agents.status();
  ASSERT_EQ(agents->size(), 6u);
  std::set<std::string> names;
  std::map<std::string, int> per_gpu;
  for (const server::WorkerAgentOptions& a : *agents) {
    EXPECT_TRUE(names.insert(a.name).second) << a.name;
    EXPECT_TRUE(a.name.starts_with("rack4/" + a.target + "/")) << a.name;
    EXPECT_EQ(a.build_threads, 8) << a.name;
    EXPECT_EQ(a.slots, 1) << "a slot's process must not fan out again";
    ++per_gpu[a.target];
  }
  EXPECT_EQ(per_gpu, (std::map<std::string, int>{{"cuda:0", 3}, {"cuda:1", 3}}));
  // One GPU named by its ordinal, default slots.
  o.target = "cuda:1";
  o.slots = 0;
  agents = server::PerDeviceAgents(o, 1, 16);
  ASSERT_TRUE(agents.ok()) << agents.status();
  ASSERT_EQ(agents->size(), static_cast<size_t>(server::kDefaultGpuSlots));
  EXPECT_GT(server::kDefaultGpuSlots, 1);
  EXPECT_EQ((*agents)[0].name, "rack4/cuda:1/1");
  EXPECT_EQ((*agents)[1].name, "rack4/cuda:1/2");
  EXPECT_EQ((*agents)[1].build_threads, 16);
  // The CPU: one worker by default; several slots would time kernels on the cores compiling.
  o.target = "llvm";
  agents = server::PerDeviceAgents(o, 1, 16);
  ASSERT_TRUE(agents.ok()) << agents.status();
  EXPECT_EQ(agents->size(), 1u);
  o.slots = 2;
  agents = server::PerDeviceAgents(o, 1, 16);
  ASSERT_FALSE(agents.ok());
  EXPECT_EQ(agents.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(agents.status().message().find("needs a cuda target"), std::string::npos) << agents.status();
}

// Without a GPU (no driver or no device), `tune worker --target cuda:all` says so in one line
// and exits non-zero before registering anything.
TEST_F(WorkerProcess, CudaAllWithoutAGpuFailsWithAClearMessage) {
  if (measure::Target::CudaDeviceCount().value_or(0) > 0) GTEST_SKIP() << "this host has a GPU";
  Subprocess serve;
  ASSERT_TRUE(ServeFirst(serve, ServeFlags()));
  ProcessResult r = RunProcess({TuneBinary(), "worker", "--server", address_, "--target", "cuda:all", "--token-file",
                                dir_.Join("token")},
                               dir_.path(), 60);
  EXPECT_NE(r.exit_code, 0) << r;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("^tune: cuda:all: .*(driver|device)"))) << r;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r;
  ProcessResult list = Workers();
  EXPECT_NE(list.out.find("(no workers)"), std::string::npos) << list;
  ProcessResult typo = RunProcess({TuneBinary(), "worker", "--server", address_, "--target", "cuda:alll",
                                   "--token-file", dir_.Join("token")},
                                  dir_.path(), 60);
  EXPECT_EQ(typo.exit_code, 2) << typo;
  EXPECT_NE(typo.err.find("bad target 'cuda:alll'"), std::string::npos) << typo;
}

TEST_F(WorkerProcess, AWrongTokenEndsTheWorkerWithAClearError) {
  Subprocess serve, worker;
  ASSERT_TRUE(ServeFirst(serve, ServeFlags()));
  WriteFileBytes(dir_.Join("wrong"), "not-the-token\n");
  ASSERT_TRUE(StartWorker(worker, "w-bad", dir_.Join("wrong")));
  const ProcessResult& r = worker.Wait();
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(ReadFileBytes(dir_.Join("w-bad.err")).find("wrong token"), std::string::npos);
  ProcessResult list = Workers();
  EXPECT_NE(list.out.find("(no workers)"), std::string::npos) << list;
}

}  // namespace
}  // namespace tune::test
