// A tuning job through real processes on loopback: one daemon, worker agents, `tune submit`.
// The database must hold exactly one search record per measured config, also when a worker
// is SIGKILLed in the middle of a batch.
#include <signal.h>

#include <map>
#include <regex>
#include <set>
#include <thread>

#include "dataset/record_database.h"
#include "gtest/gtest.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tests/server/serve_helper.h"

namespace tune::test {
namespace {

class JobProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFileBytes(dir_.Join("token"), "job-test-token\n");
    address_ = "127.0.0.1:" + std::to_string(FreePort());
  }

  bool StartWorker(Subprocess& p, const std::string& name) {
    return p.Start({TuneBinary(), "worker", "--server", address_, "--target", "llvm", "--threads", "1", "--name", name,
                    "--token-file", dir_.Join("token")},
                   dir_.path(), dir_.Join(name + ".out"), dir_.Join(name + ".err"));
  }

  ProcessResult Submit(const std::string& model, int trials, int batch) {
    return RunProcess({TuneBinary(), "submit", model, "--server", address_, "--token-file", dir_.Join("token"),
                       "--trials", std::to_string(trials), "--batch", std::to_string(batch), "--strategy", "random"},
                      dir_.path(), 600);
  }

  /// Search records per task: (config index -> count), and the number of tasks.
  std::map<int64_t, std::map<uint64_t, int>> SearchRecords() {
    std::map<int64_t, std::map<uint64_t, int>> out;
    auto db = dataset::RecordDatabase::Open(dir_.Join("r.db"), /*create=*/false);
    EXPECT_TRUE(db.ok()) << db.status();
    if (!db.ok()) return out;
    auto tasks = (*db)->Tasks();
    auto targets = (*db)->Targets();
    EXPECT_TRUE(tasks.ok() && targets.ok());
    EXPECT_EQ(targets->size(), 1u);
    for (const auto& task : *tasks) {
      auto recs = (*db)->Records(task.id, (*targets)[0].id);
      EXPECT_TRUE(recs.ok());
      for (const auto& r : *recs) {
        if (r.strategy == "default" || r.strategy == "finalist") continue;
        ++out[task.id][r.config_index];
        EXPECT_TRUE(r.result.ok()) << r.result.message;
      }
    }
    return out;
  }

  /// Every task has `per_task` search records, one per config.
  void ExpectEachConfigOnce(size_t tasks, int per_task) {
    auto recs = SearchRecords();
    ASSERT_EQ(recs.size(), tasks);
    for (const auto& [task, configs] : recs) {
      int total = 0;
      for (const auto& [index, n] : configs) {
        EXPECT_EQ(n, 1) << "task " << task << " config " << index << " recorded " << n << " times";
        total += n;
      }
      EXPECT_EQ(total, per_task) << "task " << task;
    }
  }

  TempDir dir_;
  std::string address_;
};

TEST_F(JobProcess, ThreeWorkersTuneAModelToCompletionWithOneRecordPerConfig) {
  WriteFileBytes(dir_.Join("tiny.json"), R"({"name": "tiny", "layers": [
      {"name": "fc", "op": "dense", "shape": "1,64,128", "bias": true},
      {"name": "mm", "op": "matmul", "shape": "32,32,32"},
      {"name": "conv", "op": "conv2d", "shape": "1,8,10,10,8,3,3,1,1", "relu": true}]})");
  Subprocess serve, w1, w2, w3;
  ASSERT_FALSE(StartServeOnFreePort(serve, dir_, "serve", &address_, {"--db", dir_.Join("r.db"), "--token-file", dir_.Join("token")})
                   .empty());
  ASSERT_TRUE(StartWorker(w1, "w1") && StartWorker(w2, "w2") && StartWorker(w3, "w3"));
  ProcessResult r = Submit(dir_.Join("tiny.json"), 6, 3);
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_NE(r.out.find("job 1 done"), std::string::npos) << r;
  ExpectEachConfigOnce(3, 6);
  ProcessResult jobs = RunProcess({TuneBinary(), "jobs", "--server", address_, "--token-file", dir_.Join("token")},
                                  dir_.path(), 60);
  EXPECT_NE(jobs.out.find("done"), std::string::npos) << jobs;
  // A later daemon on the same database lists the finished job as it ended, trials and all.
  serve.Kill(SIGTERM);
  serve.Wait();
  Subprocess serve2;
  ASSERT_FALSE(StartServe(serve2, dir_, "serve2", address_, {"--db", dir_.Join("r.db"), "--token-file",
                                                             dir_.Join("token")})
                   .empty());
  ProcessResult later = RunProcess({TuneBinary(), "jobs", "--server", address_, "--token-file", dir_.Join("token")},
                                   dir_.path(), 60);
  ASSERT_EQ(later.exit_code, 0) << later;
  EXPECT_TRUE(std::regex_search(later.out, std::regex("\\b1 +\\S*tiny.json +tiny +llvm +done +18/18"))) << later;
  ExpectEachConfigOnce(3, 6);  // and measured nothing again
}

// Two workers of one target key (as cuda:0 and cuda:1 of one host): every round is split
// between them unevenly (5 configs as 3 + 2, then 2 as 1 + 1, finalists 2 + 1), and the job
// ends with one record per config, nothing lost or measured twice, well within the bound.
TEST_F(JobProcess, TwoWorkersOfOneTargetFinishAJobWhoseRoundsSplitUnevenly) {
  WriteFileBytes(dir_.Join("three.json"), R"({"name": "three", "layers": [
      {"name": "fc", "op": "dense", "shape": "1,48,96", "bias": true},
      {"name": "mm", "op": "matmul", "shape": "24,40,16"},
      {"name": "conv", "op": "conv2d", "shape": "1,6,9,9,8,3,3,1,1", "relu": true}]})");
  Subprocess serve, w1, w2;
  ASSERT_FALSE(StartServeOnFreePort(serve, dir_, "serve", &address_, {"--db", dir_.Join("r.db"), "--token-file", dir_.Join("token")})
                   .empty());
  ASSERT_TRUE(StartWorker(w1, "gpu0") && StartWorker(w2, "gpu1"));
  ASSERT_FALSE(WaitForMatch(dir_.Join("gpu0.out"), "registered as worker").empty()) << ReadFileBytes(dir_.Join("gpu0.err"));
  ASSERT_FALSE(WaitForMatch(dir_.Join("gpu1.out"), "registered as worker").empty()) << ReadFileBytes(dir_.Join("gpu1.err"));
  // The default strategy (model-guided), as a user runs it; 300 s is a safety bound only.
  ProcessResult r = RunProcess({TuneBinary(), "submit", dir_.Join("three.json"), "--server", address_, "--token-file",
                                dir_.Join("token"), "--trials", "7", "--batch", "5"},
                               dir_.path(), 300);
  ASSERT_EQ(r.exit_code, 0) << r << ReadFileBytes(dir_.Join("gpu0.out")) << ReadFileBytes(dir_.Join("gpu1.out"));
  EXPECT_NE(r.out.find("job 1 done"), std::string::npos) << r;
  ExpectEachConfigOnce(3, 7);
  // One default-schedule record per task; finalists are configs measured before.
  auto db = dataset::RecordDatabase::Open(dir_.Join("r.db"), /*create=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto tasks = (*db)->Tasks();
  auto targets = (*db)->Targets();
  ASSERT_TRUE(tasks.ok() && targets.ok() && targets->size() == 1u);
  for (const auto& task : *tasks) {
    auto recs = (*db)->Records(task.id, (*targets)[0].id);
    ASSERT_TRUE(recs.ok());
    int defaults = 0;
    std::set<uint64_t> searched, finalists;
    for (const auto& rec : *recs) {
      if (rec.strategy == "default") ++defaults;
      else if (rec.strategy == "finalist") EXPECT_TRUE(finalists.insert(rec.config_index).second);
      else searched.insert(rec.config_index);
    }
    EXPECT_EQ(defaults, 1) << "task " << task.id;
    for (uint64_t f : finalists) EXPECT_EQ(searched.count(f), 1u) << "finalist " << f << " was never searched";
  }
  // Both workers measured, and rounds were split unevenly between them.
  const std::string logs = ReadFileBytes(dir_.Join("gpu0.out")) + ReadFileBytes(dir_.Join("gpu1.out"));
  EXPECT_TRUE(std::regex_search(ReadFileBytes(dir_.Join("gpu0.out")), std::regex("batch [0-9]+: [0-9]+ configs")));
  EXPECT_TRUE(std::regex_search(ReadFileBytes(dir_.Join("gpu1.out")), std::regex("batch [0-9]+: [0-9]+ configs")));
  EXPECT_TRUE(std::regex_search(logs, std::regex("batch [0-9]+: 3 configs"))) << logs;
  EXPECT_TRUE(std::regex_search(logs, std::regex("batch [0-9]+: 2 configs"))) << logs;
  EXPECT_EQ(logs.find("discarded"), std::string::npos) << logs;
}

TEST_F(JobProcess, AWorkerKilledMidBatchLosesNothing) {
  WriteFileBytes(dir_.Join("one.json"), R"({"name": "one", "layers": [
      {"name": "mm", "op": "matmul", "shape": "192,192,192"}]})");
  Subprocess serve, victim, survivor;
  ASSERT_FALSE(StartServeOnFreePort(serve, dir_, "serve", &address_, {"--db", dir_.Join("r.db"), "--token-file", dir_.Join("token")})
                   .empty());
  ASSERT_TRUE(StartWorker(victim, "victim"));
  // The victim registers alone so the first search batch is leased to it.
  ASSERT_FALSE(WaitForMatch(dir_.Join("victim.out"), "registered as worker").empty());
  Subprocess submit;
  ASSERT_TRUE(submit.Start({TuneBinary(), "submit", dir_.Join("one.json"), "--server", address_, "--token-file",
                            dir_.Join("token"), "--trials", "8", "--batch", "4", "--strategy", "random"},
                           dir_.path(), dir_.Join("submit.out"), dir_.Join("submit.err")));
  ASSERT_FALSE(WaitForMatch(dir_.Join("victim.out"), "batch [0-9]+: 4 configs").empty())
      << ReadFileBytes(dir_.Join("victim.err"));
  victim.Kill(SIGKILL);
  victim.Wait();
  ASSERT_TRUE(StartWorker(survivor, "survivor"));
  const ProcessResult& s = submit.Wait();
  EXPECT_EQ(s.exit_code, 0) << ReadFileBytes(dir_.Join("submit.out")) << ReadFileBytes(dir_.Join("submit.err"));
  EXPECT_NE(ReadFileBytes(dir_.Join("submit.out")).find("job 1 done"), std::string::npos);
  ExpectEachConfigOnce(1, 8);
}

TEST_F(JobProcess, ADaemonKilledMidJobResumesItAfterARestart) {
  WriteFileBytes(dir_.Join("one.json"), R"({"name": "one", "layers": [
      {"name": "mm", "op": "matmul", "shape": "192,192,192"}]})");
  const std::vector<std::string> flags = {"--db", dir_.Join("r.db"), "--token-file", dir_.Join("token")};
  Subprocess worker, submit;
  ASSERT_TRUE(StartWorker(worker, "w"));
  {
    Subprocess serve;
    ASSERT_FALSE(StartServe(serve, dir_, "serve1", address_, flags).empty());
    // The client watches the job across the restart.
    ASSERT_TRUE(submit.Start({TuneBinary(), "submit", dir_.Join("one.json"), "--server", address_, "--token-file",
                              dir_.Join("token"), "--trials", "12", "--batch", "4", "--strategy", "random"},
                             dir_.path(), dir_.Join("submit.out"), dir_.Join("submit.err")));
    // Kill the daemon once one search batch is acknowledged (the default schedule's batch
    // comes first) and the next is being measured.
    ASSERT_FALSE(WaitForMatch(dir_.Join("w.out"), "committed[^]*committed[^]*batch [0-9]+: 4 configs", 120).empty())
        << ReadFileBytes(dir_.Join("w.out"));
    serve.Kill(SIGKILL);
    serve.Wait();
  }
  Subprocess serve2;
  ASSERT_FALSE(StartServe(serve2, dir_, "serve2", address_, flags).empty());
  std::string jobs;
  for (int i = 0; i < 600 && jobs.find(" done ") == std::string::npos; ++i) {
    jobs = RunProcess({TuneBinary(), "jobs", "--server", address_, "--token-file", dir_.Join("token")}, dir_.path(),
                      60).out;
    if (jobs.find(" done ") == std::string::npos) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_NE(jobs.find(" done "), std::string::npos) << jobs << ReadFileBytes(dir_.Join("w.out"));
  ExpectEachConfigOnce(1, 12);
  const ProcessResult& s = submit.Wait();
  const std::string out = ReadFileBytes(dir_.Join("submit.out"));
  EXPECT_EQ(s.exit_code, 0) << out << ReadFileBytes(dir_.Join("submit.err"));
  EXPECT_NE(out.find("reattaching"), std::string::npos) << out;
  EXPECT_NE(out.find("job 1 done"), std::string::npos) << out;
}

TEST_F(JobProcess, CancelEndsAQueuedJobAndJobsShowsNamesEscaped) {
  Subprocess serve;
  ASSERT_FALSE(StartServeOnFreePort(serve, dir_, "serve", &address_, {"--db", dir_.Join("r.db"), "--token-file", dir_.Join("token")})
                   .empty());
  WriteFileBytes(dir_.Join("one.json"), R"({"name": "one", "layers": [{"op": "matmul", "shape": "8,8,8"}]})");
  // No worker: the job waits, and says so.
  ProcessResult submit = RunProcess({TuneBinary(), "submit", dir_.Join("one.json"), "--server", address_,
                                     "--token-file", dir_.Join("token"), "--name", "evil\x1b]0;owned\x07\x1b[2J",
                                     "--detach"},
                                    dir_.path(), 60);
  ASSERT_EQ(submit.exit_code, 0) << submit;
  auto jobs = [&] {
    return RunProcess({TuneBinary(), "jobs", "--server", address_, "--token-file", dir_.Join("token")}, dir_.path(),
                      60);
  };
  ProcessResult listed = jobs();
  ASSERT_EQ(listed.exit_code, 0) << listed;
  EXPECT_EQ(listed.out.find('\x1b'), std::string::npos) << listed;
  EXPECT_EQ(listed.out.find('\x07'), std::string::npos) << listed;
  EXPECT_NE(listed.out.find("evil\\x1b]0;owned\\x07\\x1b[2J"), std::string::npos) << listed;
  EXPECT_NE(listed.out.find("waiting for a live llvm worker"), std::string::npos) << listed;

  auto cancel = [&](const std::string& id) {
    return RunProcess({TuneBinary(), "cancel", id, "--server", address_, "--token-file", dir_.Join("token")},
                      dir_.path(), 60);
  };
  ProcessResult ok = cancel("1");
  EXPECT_EQ(ok.exit_code, 0) << ok;
  EXPECT_EQ(ok.out, "job 1 cancelled\n") << ok;
  EXPECT_TRUE(std::regex_search(jobs().out, std::regex("\\b1 .* cancelled +[0-9]+/[0-9]+ +cancelled")));
  ProcessResult again = cancel("1");
  EXPECT_EQ(again.exit_code, 0) << again;
  ProcessResult unknown = cancel("99");
  EXPECT_EQ(unknown.exit_code, 2) << unknown;
  EXPECT_NE(unknown.err.find("no job 99"), std::string::npos) << unknown;
  ProcessResult bad = cancel("abc");
  EXPECT_EQ(bad.exit_code, 2) << bad;
}

// --layout nchwc: the model is planned by the submitting tune, and the job tunes the blocked
// convolutions (a key with its channel block), as `tune MODEL --layout nchwc` does.
TEST_F(JobProcess, ABlockedLayoutSubmissionTunesTheNchwcConvolutions) {
  WriteFileBytes(dir_.Join("blocked.json"), R"({"name": "blocked", "layers": [
      {"name": "conv", "op": "conv2d", "shape": "1,16,8,8,16,3,3,1,1", "relu": true},
      {"name": "fc", "op": "dense", "shape": "1,32,16"}]})");
  Subprocess serve, w1;
  ASSERT_FALSE(StartServeOnFreePort(serve, dir_, "serve", &address_, {"--db", dir_.Join("r.db"), "--token-file", dir_.Join("token")})
                   .empty());
  ASSERT_TRUE(StartWorker(w1, "w1"));
  ProcessResult r = RunProcess({TuneBinary(), "submit", dir_.Join("blocked.json"), "--server", address_, "--token-file",
                                dir_.Join("token"), "--trials", "2", "--batch", "2", "--strategy", "random", "--layout",
                                "nchwc"},
                               dir_.path(), 300);
  ASSERT_EQ(r.exit_code, 0) << r;
  auto db = dataset::RecordDatabase::Open(dir_.Join("r.db"), /*create=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto tasks = (*db)->Tasks();
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  std::vector<std::string> keys;
  for (const auto& task : *tasks) keys.push_back(task.workload_key);
  ASSERT_EQ(keys.size(), 2u);
  int blocked = 0;
  for (const std::string& key : keys) blocked += std::regex_search(key, std::regex("^conv2d/.*_nchw(8|16)c/")) ? 1 : 0;
  EXPECT_EQ(blocked, 1) << keys[0] << " " << keys[1];
  ExpectEachConfigOnce(2, 2);
}

TEST_F(JobProcess, BadSubmissionsAreRejectedWithAReason) {
  Subprocess serve;
  ASSERT_FALSE(StartServeOnFreePort(serve, dir_, "serve", &address_, {"--db", dir_.Join("r.db"), "--token-file", dir_.Join("token")})
                   .empty());
  ProcessResult unknown = Submit("no-such-model", 4, 2);
  EXPECT_EQ(unknown.exit_code, 2) << unknown;
  EXPECT_NE(unknown.err.find("no-such-model"), std::string::npos) << unknown;
  WriteFileBytes(dir_.Join("bad.json"), R"({"layers": [{"op": "conv2d", "shape": "1,2,3"}]})");
  ProcessResult bad = Submit(dir_.Join("bad.json"), 4, 2);
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_NE(bad.err.find("malformed model"), std::string::npos) << bad;
  ProcessResult strategy = RunProcess({TuneBinary(), "submit", "resnet-18", "--server", address_, "--token-file",
                                       dir_.Join("token"), "--strategy", "nonsense"},
                                      dir_.path(), 60);
  EXPECT_EQ(strategy.exit_code, 2) << strategy;
  ProcessResult blocked_gpu = RunProcess({TuneBinary(), "submit", "resnet-18", "--server", address_, "--token-file",
                                          dir_.Join("token"), "--target", "cuda", "--layout", "nchwc"},
                                         dir_.path(), 60);
  EXPECT_EQ(blocked_gpu.exit_code, 2) << blocked_gpu;
  EXPECT_NE(blocked_gpu.err.find("--layout nchwc is for CPU targets"), std::string::npos) << blocked_gpu;
  ProcessResult jobs = RunProcess({TuneBinary(), "jobs", "--server", address_, "--token-file", dir_.Join("token")},
                                  dir_.path(), 60);
  EXPECT_NE(jobs.out.find("(no jobs)"), std::string::npos) << jobs;
}

}  // namespace
}  // namespace tune::test
