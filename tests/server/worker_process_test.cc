// `tune worker` against a real `tune serve` on loopback: registration, expiry after SIGTERM,
// waiting for a daemon that is not up yet, re-registering after a daemon restart, a wrong token.
#include <signal.h>

#include <regex>
#include <thread>

#include "gtest/gtest.h"
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
  ASSERT_EQ(StartServe(serve, dir_, "serve", address_, ServeFlags()), port_) << ReadFileBytes(dir_.Join("serve.err"));
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
  ASSERT_EQ(StartServe(serve, dir_, "serve", address_,
                       {"--db", dir_.Join("r.db"), "--token-file", dir_.Join("token"), "--expire-after", "600"}),
            port_);
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

TEST_F(WorkerProcess, AWrongTokenEndsTheWorkerWithAClearError) {
  Subprocess serve, worker;
  ASSERT_EQ(StartServe(serve, dir_, "serve", address_, ServeFlags()), port_);
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
