// `tune worker` against a real `tune serve` on loopback: registration, expiry after SIGTERM,
// waiting for a daemon that is not up yet, re-registering after a daemon restart, a wrong token.
#include <signal.h>

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

TEST_F(WorkerProcess, RegistersIsListedAndExpiresAfterSigterm) {
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
  std::string expired;
  for (int i = 0; i < 100 && expired.empty(); ++i) {  // expiry is 1 s; the janitor runs every 0.5 s
    ProcessResult again = Workers();
    if (again.out.find("expired") != std::string::npos) expired = again.out;
    else std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(expired.empty());
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
