// Tests of ChildProcess with bodies that answer, crash, hang, exit silently or write garbage.
#include "measure/child_process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/child_message.h"
#include "tests/common/subprocess.h"

namespace tune::measure {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Clock = ChildProcess::Clock;
using Read = ChildProcess::Read;

// Generous: only bounds how long a broken test can wait; nothing asserts on time.
constexpr auto kPatience = std::chrono::seconds(30);
constexpr auto kShort = std::chrono::milliseconds(200);
constexpr uint32_t kMagic = 0x444c4843;  // the frame's magic number, "CHLD"

std::unique_ptr<ChildProcess> StartOrDie(const ChildProcess::Body& body) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(body);
  EXPECT_TRUE(child.ok()) << child.status();
  return child.ok() ? std::move(*child) : nullptr;
}

// Writes raw bytes on the channel's pipe, bypassing the framing.
void WriteRaw(ChildProcess::Channel& channel, const std::string& bytes) {
  if (::write(channel.fd(), bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) ::_exit(99);
}

std::string Header(uint32_t magic, uint32_t length) {
  std::string bytes(reinterpret_cast<const char*>(&magic), sizeof(magic));
  bytes.append(reinterpret_cast<const char*>(&length), sizeof(length));
  return bytes;
}

void Spin() {
  volatile bool spin = true;
  while (spin) {
  }
}

// How a child ended, read the way the runners read theirs.
struct Ending {
  std::vector<std::string> messages;  // every message before the end
  Read read = Read::kMessage;         // how reading ended
  Read read_again = Read::kMessage;   // what reading once more gives
  std::string error;                  // the pipe's error after kBroken
  size_t partial_bytes = 0;
  ChildExit exit;
  MeasureResult lost;  // LostResult with a timeout of 1 s
};

// Runs `body` and reads its messages until the end or `read_deadline` from now; waits
// `wait_deadline` from then for the exit after kEnd, kills it otherwise.
Ending RunToEnd(const ChildProcess::Body& body, Clock::duration read_deadline = kPatience,
                Clock::duration wait_deadline = kPatience) {
  Ending end;
  std::unique_ptr<ChildProcess> child = StartOrDie(body);
  if (child == nullptr) return end;
  const Clock::time_point deadline = Clock::now() + read_deadline;
  std::string payload;
  while ((end.read = child->Next(deadline, &payload)) == Read::kMessage) end.messages.push_back(payload);
  end.read_again = child->Next(Clock::now(), &payload);
  end.error = child->error();
  end.partial_bytes = child->partial_bytes();
  end.exit = end.read == Read::kEnd ? child->Wait(Clock::now() + wait_deadline) : child->Kill();
  end.lost = LostResult(end.read, *child, end.exit, 1);
  return end;
}

// The process exists and is not a zombie.
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

// Every child of this process has been reaped.
TEST(ChildProcessTest, StreamsMessagesInOrderAndExitsCleanly) {
  const std::string big(3 << 20, 'x');  // larger than a pipe's buffer: read in many pieces
  auto child = StartOrDie([&](ChildProcess::Channel& channel) {
    channel.Send("first");
    channel.Send("");
    channel.Send(big);
    return 0;
  });
  ASSERT_NE(child, nullptr);
  std::string payload;
  ASSERT_EQ(child->Next(Clock::now() + kPatience, &payload), Read::kMessage);
  EXPECT_EQ(payload, "first");
  ASSERT_EQ(child->Next(Clock::now() + kPatience, &payload), Read::kMessage);
  EXPECT_EQ(payload, "");
  ASSERT_EQ(child->Next(Clock::now() + kPatience, &payload), Read::kMessage);
  EXPECT_EQ(payload, big);
  EXPECT_EQ(child->Next(Clock::now() + kPatience, &payload), Read::kEnd);
  EXPECT_EQ(child->Next(Clock::now() + kPatience, &payload), Read::kEnd);
  EXPECT_EQ(child->partial_bytes(), 0u);
  const ChildExit exit = child->Wait(Clock::now() + kPatience);
  EXPECT_TRUE(exit.Clean()) << exit.ToString();
  EXPECT_EQ(exit.ToString(), "exit code 0");
  EXPECT_TRUE(child->Wait(Clock::now()).Clean());  // asking again gives the same answer
  test::ExpectNoChildren();
}

TEST(ChildProcessTest, EveryChildIsSetUpTheSameWay) {
  // The parent blocks a signal and catches or ignores others; none of that reaches the child.
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &block, &old_mask), 0);
  struct sigaction ignore {}, old_usr1 {}, old_segv {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGUSR1, &ignore, &old_usr1), 0);
  struct sigaction handler {};
  handler.sa_handler = [](int) {};
  ASSERT_EQ(::sigaction(SIGSEGV, &handler, &old_segv), 0);

  auto child = StartOrDie([](ChildProcess::Channel& channel) {
    rlimit core{};
    ::getrlimit(RLIMIT_CORE, &core);
    int death_signal = 0;
    ::prctl(PR_GET_PDEATHSIG, &death_signal);
    sigset_t blocked;
    ::sigprocmask(SIG_SETMASK, nullptr, &blocked);
    auto disposition = [](int sig) {
      struct sigaction current {};
      ::sigaction(sig, nullptr, &current);
      return current.sa_handler == SIG_DFL ? 0 : current.sa_handler == SIG_IGN ? 1 : 2;
    };
    MessageWriter w;
    w.Put<uint64_t>(core.rlim_cur).Put<uint64_t>(core.rlim_max).Put<int32_t>(death_signal);
    w.Put<int32_t>(sigismember(&blocked, SIGUSR2));
    for (int sig : {SIGSEGV, SIGUSR1, SIGPIPE, SIGINT, SIGTERM}) w.Put<int32_t>(disposition(sig));
    channel.Send(w.bytes());
    return 0;
  });

  ::sigaction(SIGSEGV, &old_segv, nullptr);
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ASSERT_NE(child, nullptr);
  std::string payload;
  ASSERT_EQ(child->Next(Clock::now() + kPatience, &payload), Read::kMessage);
  MessageReader r(payload);
  uint64_t core_cur = 1, core_max = 1;
  int32_t death_signal = 0, usr2_blocked = 1;
  int32_t segv = -1, usr1 = -1, pipe = -1, interrupt = -1, terminate = -1;
  ASSERT_TRUE(r.Get(&core_cur) && r.Get(&core_max) && r.Get(&death_signal) && r.Get(&usr2_blocked) &&
              r.Get(&segv) && r.Get(&usr1) && r.Get(&pipe) && r.Get(&interrupt) && r.Get(&terminate) && r.Done());
  EXPECT_EQ(core_cur, 0u);  // no core files
  EXPECT_EQ(core_max, 0u);
  EXPECT_EQ(death_signal, SIGKILL);  // dies with the parent
  EXPECT_EQ(usr2_blocked, 0);        // nothing blocked
  EXPECT_EQ(segv, 0);                // default dispositions...
  EXPECT_EQ(usr1, 0);
  EXPECT_EQ(pipe, 0);
  EXPECT_EQ(interrupt, 1);  // ...but Ctrl-C and SIGTERM are the parent's to act on
  EXPECT_EQ(terminate, 1);
  EXPECT_TRUE(child->Wait(Clock::now() + kPatience).Clean());
}

TEST(ChildProcessTest, CrashIsReportedWithItsSignal) {
  const Ending end = RunToEnd([](ChildProcess::Channel& channel) {
    channel.Send("about to crash");
    volatile int* null = nullptr;
    *null = 1;
    return 0;
  });
  EXPECT_EQ(end.messages, std::vector<std::string>{"about to crash"});
  EXPECT_EQ(end.read, Read::kEnd);
  EXPECT_TRUE(end.exit.kind == ChildExit::Kind::kSignaled && end.exit.signal == SIGSEGV) << end.exit.ToString();
  EXPECT_EQ(end.exit.ToString(), "SIGSEGV (signal 11: Segmentation fault)");
  EXPECT_EQ(end.lost.status, MeasureStatus::kRuntimeError);
  EXPECT_EQ(end.lost.message, "kernel crashed: SIGSEGV (signal 11: Segmentation fault)");
}

TEST(ChildProcessTest, SignalIgnoredByTheParentStillEndsTheChild) {
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGUSR1, &ignore, &old), 0);
  const Ending end = RunToEnd([](ChildProcess::Channel&) {
    ::raise(SIGUSR1);
    return 0;
  });
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(end.exit.kind, ChildExit::Kind::kSignaled);
  EXPECT_THAT(end.exit.ToString(), StartsWith("SIGUSR1 (signal 10"));
}

TEST(ChildProcessTest, HangIsKilledAtTheDeadline) {
  const Ending end = RunToEnd(
      [](ChildProcess::Channel&) {
        Spin();
        return 0;
      },
      kShort);
  EXPECT_EQ(end.read, Read::kTimedOut);
  EXPECT_EQ(end.exit.kind, ChildExit::Kind::kKilled);
  EXPECT_EQ(end.exit.signal, SIGKILL);
  EXPECT_EQ(end.exit.ToString(), "killed by the parent");
  EXPECT_EQ(end.lost.status, MeasureStatus::kTimeout);
  EXPECT_EQ(end.lost.message, "kernel did not finish within 1s");
  test::ExpectNoChildren();
}

TEST(ChildProcessTest, ClosedPipeThenHangIsKilledByWait) {
  const Ending end = RunToEnd(
      [](ChildProcess::Channel&) {
        for (int fd = 3; fd < 1024; ++fd) ::close(fd);
        Spin();
        return 0;
      },
      kPatience, kShort);
  EXPECT_EQ(end.read, Read::kEnd);
  EXPECT_EQ(end.exit.kind, ChildExit::Kind::kKilled);
  EXPECT_EQ(end.lost.status, MeasureStatus::kTimeout);
  test::ExpectNoChildren();
}

TEST(ChildProcessTest, SilentExitsSayHowTheChildEnded) {
  for (int code : {0, 7}) {
    const Ending end = RunToEnd([code](ChildProcess::Channel&) { return code; });
    EXPECT_EQ(end.read, Read::kEnd);
    EXPECT_EQ(end.exit.kind, ChildExit::Kind::kExited);
    EXPECT_EQ(end.exit.code, code);
    EXPECT_EQ(end.lost.status, MeasureStatus::kRuntimeError);
    EXPECT_EQ(end.lost.message, code == 0 ? "kernel process exited without a result"
                                          : "kernel process exited with code 7 without a result");
  }
}

TEST(ChildProcessTest, ThrowingBodyExitsWithItsOwnCode) {
  const Ending end = RunToEnd([](ChildProcess::Channel&) -> int { throw std::runtime_error("planted"); });
  EXPECT_EQ(end.exit.kind, ChildExit::Kind::kExited);
  EXPECT_EQ(end.exit.code, ChildProcess::kThrewExit);
}

TEST(ChildProcessTest, IncompleteMessageCountsItsBytes) {
  for (const std::string& bytes : {Header(kMagic, 100) + "0123456789", std::string("abc")}) {
    const Ending end = RunToEnd([&](ChildProcess::Channel& channel) {
      WriteRaw(channel, bytes);
      return 0;
    });
    EXPECT_EQ(end.read, Read::kEnd);
    EXPECT_EQ(end.partial_bytes, bytes.size());
    EXPECT_EQ(end.lost.message,
              "kernel process sent an incomplete result (" + std::to_string(bytes.size()) + " bytes)");
  }
}

TEST(ChildProcessTest, GarbageBreaksThePipeAndTheChildIsKilled) {
  const std::vector<std::string> garbage = {
      "this is not a message header",
      Header(kMagic, ChildProcess::kMaxMessageBytes + 1),  // right magic, absurd length
  };
  for (const std::string& bytes : garbage) {
    const Ending end = RunToEnd([&](ChildProcess::Channel& channel) {
      channel.Send("a good message first");
      WriteRaw(channel, bytes);
      Spin();
      return 0;
    });
    EXPECT_EQ(end.messages, std::vector<std::string>{"a good message first"});
    EXPECT_EQ(end.read, Read::kBroken);
    EXPECT_EQ(end.read_again, Read::kBroken);
    EXPECT_THAT(end.error, HasSubstr("malformed message header"));
    EXPECT_EQ(end.exit.kind, ChildExit::Kind::kKilled);
    EXPECT_EQ(end.lost.status, MeasureStatus::kRuntimeError);
    EXPECT_EQ(end.lost.message, end.error);
  }
  test::ExpectNoChildren();
}

TEST(ChildProcessTest, MalformedPayloadIsRuntimeError) {
  auto child = StartOrDie([](ChildProcess::Channel& channel) {
    channel.Send("not a result");
    return 0;
  });
  ASSERT_NE(child, nullptr);
  std::string payload;
  const Read read = child->Next(Clock::now() + kPatience, &payload);
  ASSERT_EQ(read, Read::kMessage);
  MeasureResult result;
  EXPECT_FALSE(MessageReader(payload).GetResult(&result));
  const MeasureResult lost = LostResult(read, *child, child->Wait(Clock::now() + kPatience), 1);
  EXPECT_EQ(lost.status, MeasureStatus::kRuntimeError);
  EXPECT_EQ(lost.message, "malformed result from kernel process");
}

TEST(ChildProcessTest, DestroyingARunningChildKillsAndReapsIt) {
  pid_t pid = 0;
  {
    auto child = StartOrDie([](ChildProcess::Channel&) {
      Spin();
      return 0;
    });
    ASSERT_NE(child, nullptr);
    pid = child->pid();
    EXPECT_GT(pid, 0);
  }
  errno = 0;
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

// The child dies with its parent: a process starts a hanging child, reports its pid and exits.
TEST(ChildProcessTest, ChildDiesWithItsParent) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    ::close(fds[0]);
    absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start([](ChildProcess::Channel&) {
      Spin();
      return 0;
    });
    const pid_t grandchild = child.ok() ? (*child)->pid() : 0;
    const bool sent = ::write(fds[1], &grandchild, sizeof(grandchild)) == sizeof(grandchild);
    ::_exit(sent ? 0 : 1);  // no destructor runs: only PR_SET_PDEATHSIG can end the grandchild
  }
  ::close(fds[1]);
  pid_t grandchild = 0;
  ASSERT_EQ(::read(fds[0], &grandchild, sizeof(grandchild)), static_cast<ssize_t>(sizeof(grandchild)));
  ::close(fds[0]);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(middle, &wstatus, 0), middle);
  ASSERT_GT(grandchild, 0);
  // Reparented to init (or a subreaper); wait until it is dead.
  const Clock::time_point give_up = Clock::now() + kPatience;
  while (Alive(grandchild) && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(Alive(grandchild)) << "pid " << grandchild << " outlived its parent";
  if (Alive(grandchild)) ::kill(grandchild, SIGKILL);
}

TEST(ChildProcessTest, SignalTextNamesAndDescribes) {
  EXPECT_EQ(SignalText(SIGABRT), "SIGABRT (signal 6: Aborted)");
  EXPECT_EQ(SignalText(SIGKILL), "SIGKILL (signal 9: Killed)");
}

}  // namespace
}  // namespace tune::measure
