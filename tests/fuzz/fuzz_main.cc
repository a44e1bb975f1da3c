// tune_fuzz: the seeded mutation harness that runs the fuzz targets (bounded in ctest, long in scripts/fuzz).
//
//   tune_fuzz TARGET --corpus DIR --inputs N [--seed S] [--time-limit-s T] [--out DIR]
//             [--first I] [--max-saved K]
//   tune_fuzz TARGET --replay FILE...        run saved inputs once each, in this process
//   tune_fuzz daemon --write-daemon-seeds DIR    write the daemon target's seed corpus
//
// The corpus entries run first as they are, then N mutated inputs (tests/fuzz/mutator.h). The
// inputs run in a child process; a child that dies (signal, sanitizer report, non-zero exit)
// or spends longer than T seconds on one input is a crash or a hang: the input is saved under
// --out (crash-<target>-<index>, hang-<target>-<index>), and a fresh child goes on with the
// next input. Prints one summary line; exits 0 when there were no crashes and no hangs, 1
// otherwise, 2 for bad arguments.
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/mutator.h"

namespace tune::fuzz {

std::vector<std::string> DaemonSeeds();

namespace {

constexpr size_t kMaxInput = size_t{1} << 22;

// What the child shares with the parent: the input it runs now and since when.
struct Shared {
  std::atomic<int64_t> index;       // input running now; -1 before the first
  std::atomic<int64_t> started_ns;  // monotonic start of that input; 0 between inputs
  std::atomic<int64_t> done;        // inputs finished by this child
  std::atomic<uint64_t> size;
  char data[kMaxInput];
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<std::string> LoadCorpus(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file()) names.push_back(e.path().string());
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> corpus;
  for (const auto& n : names) corpus.push_back(ReadFile(n));
  return corpus;
}

int Usage(const char* why) {
  std::fprintf(stderr, "tune_fuzz: %s\nusage: tune_fuzz TARGET --corpus DIR --inputs N [--seed S] "
               "[--time-limit-s T] [--out DIR] [--first I] [--max-saved K] | tune_fuzz TARGET --replay FILE...\n",
               why);
  return 2;
}

// Runs inputs [first, total) in this (child) process, publishing each in `shared`.
[[noreturn]] void ChildLoop(const FuzzTarget& target, const std::vector<std::string>& corpus, const Mutator& mutator,
                            uint64_t seed, int64_t first, int64_t total, Shared* shared) {
  for (int64_t i = first; i < total; ++i) {
    const std::string input = i < static_cast<int64_t>(corpus.size())
                                  ? corpus[i]
                                  : mutator.Generate(seed, static_cast<uint64_t>(i - corpus.size()));
    const size_t n = std::min(input.size(), kMaxInput);
    std::memcpy(shared->data, input.data(), n);
    shared->size.store(n);
    shared->index.store(i);
    shared->started_ns.store(NowNs());
    target.run(reinterpret_cast<const uint8_t*>(input.data()), n);
    shared->started_ns.store(0);
    shared->done.fetch_add(1);
  }
  std::fflush(nullptr);
  _exit(0);
}

std::string Describe(int status) {
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  return "status " + std::to_string(status);
}

}  // namespace
}  // namespace tune::fuzz

int main(int argc, char** argv) {
  using namespace tune::fuzz;
  if (argc < 2) return Usage("no target");
  const FuzzTarget* target = FindTarget(argv[1]);
  if (target == nullptr) {
    std::string names;
    for (const auto& t : Targets()) names += " " + t.name;
    return Usage(("unknown target '" + std::string(argv[1]) + "'; targets:" + names).c_str());
  }
  std::string corpus_dir, out_dir = ".";
  int64_t inputs = 0, first = 0, max_saved = 20;
  uint64_t seed = 1;
  double time_limit_s = 2;
  std::vector<std::string> replay;
  bool replaying = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        Usage((a + " needs a value").c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--corpus") corpus_dir = value();
      else if (a == "--inputs") inputs = std::stoll(value());
      else if (a == "--seed") seed = std::stoull(value());
      else if (a == "--time-limit-s") time_limit_s = std::stod(value());
      else if (a == "--out") out_dir = value();
      else if (a == "--first") first = std::stoll(value());
      else if (a == "--max-saved") max_saved = std::stoll(value());
      else if (a == "--replay") replaying = true;
      else if (a == "--write-daemon-seeds") {
        // The daemon target's seed corpus (binary protos), written once into its folder.
        std::string dir = value();
        std::filesystem::create_directories(dir);
        int n = 0;
        for (const auto& seed : DaemonSeeds()) {
          std::ofstream(dir + "/seed-" + std::to_string(n++), std::ios::binary) << seed;
        }
        return 0;
      }
      else if (replaying) replay.push_back(a);
      else return Usage(("unknown argument '" + a + "'").c_str());
    } catch (const std::exception&) {
      return Usage(("bad value for " + a).c_str());
    }
  }
  if (replaying) {
    for (const auto& path : replay) {
      std::string input = ReadFile(path);
      std::fprintf(stderr, "tune_fuzz %s: running %s (%zu bytes)\n", target->name.c_str(), path.c_str(), input.size());
      target->run(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    }
    std::fprintf(stderr, "tune_fuzz %s: %zu inputs ran without a crash\n", target->name.c_str(), replay.size());
    return 0;
  }
  if (corpus_dir.empty()) return Usage("--corpus is required");
  if (inputs < 0 || time_limit_s <= 0 || first < 0) return Usage("--inputs, --first and --time-limit-s must be positive");
  const std::vector<std::string> corpus = LoadCorpus(corpus_dir);
  if (corpus.empty()) return Usage(("no corpus entries in " + corpus_dir).c_str());
  const Mutator mutator(corpus, target->dictionary, target->max_size, target->binary, target->mutate);
  std::filesystem::create_directories(out_dir);
  // The targets' scratch files (one folder per child) go into a folder removed at the end.
  std::error_code ec;
  const std::string scratch_base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : std::filesystem::temp_directory_path(ec).string();
  const std::string scratch = scratch_base + "/tune-fuzz-" + target->name + "-" + std::to_string(getpid());
  std::filesystem::create_directories(scratch, ec);
  setenv("TUNE_FUZZ_TMP", scratch.c_str(), 1);

  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return Usage("mmap failed");
  auto* shared = new (mem) Shared();
  const int64_t total = static_cast<int64_t>(corpus.size()) + inputs;
  const int64_t limit_ns = static_cast<int64_t>(time_limit_s * 1e9);
  const auto started = std::chrono::steady_clock::now();
  int64_t next = first, ran = 0, crashes = 0, hangs = 0, saved = 0;
  while (next < total) {
    shared->index.store(-1);
    shared->started_ns.store(0);
    shared->done.store(0);
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) return Usage("fork failed");
    if (pid == 0) ChildLoop(*target, corpus, mutator, seed, next, total, shared);
    int status = 0;
    bool hung = false;
    for (;;) {
      pid_t got = waitpid(pid, &status, WNOHANG);
      if (got == pid) break;
      const int64_t since = shared->started_ns.load();
      if (since != 0 && NowNs() - since > limit_ns) {
        hung = true;
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      usleep(2000);
    }
    ran += shared->done.load();
    const int64_t index = shared->index.load();
    if (!hung && WIFEXITED(status) && WEXITSTATUS(status) == 0) break;  // all done
    if (index < 0) {
      std::fprintf(stderr, "tune_fuzz %s: the child died before its first input (%s)\n", target->name.c_str(),
                   Describe(status).c_str());
      return 1;
    }
    ++ran;
    (hung ? hangs : crashes)++;
    const std::string kind = hung ? "hang" : "crash";
    if (saved < max_saved) {
      const std::string path = out_dir + "/" + kind + "-" + target->name + "-" + std::to_string(index);
      std::ofstream(path, std::ios::binary).write(shared->data, static_cast<std::streamsize>(shared->size.load()));
      ++saved;
      std::fprintf(stderr, "tune_fuzz %s: input %lld: %s (%s); saved as %s\n", target->name.c_str(),
                   static_cast<long long>(index), kind.c_str(),
                   hung ? ("over " + std::to_string(time_limit_s) + " s").c_str() : Describe(status).c_str(),
                   path.c_str());
    }
    next = index + 1;
  }
  std::filesystem::remove_all(scratch, ec);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("fuzz %s: %lld inputs (%zu corpus + %lld mutated, seed %llu), %lld crashes, %lld hangs, %.1f s\n",
              target->name.c_str(), static_cast<long long>(ran), corpus.size(), static_cast<long long>(inputs),
              static_cast<unsigned long long>(seed), static_cast<long long>(crashes), static_cast<long long>(hangs),
              seconds);
  return crashes == 0 && hangs == 0 ? 0 : 1;
}
