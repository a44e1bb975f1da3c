// ChildProcess: fork and isolate the child, frame its messages, read them with deadlines, reap it.
#include "measure/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tune::measure {
namespace {

using Clock = ChildProcess::Clock;

// Frame of a message: magic, payload length (u32), payload.
constexpr uint32_t kMagic = 0x444c4843;  // "CHLD", little-endian
constexpr size_t kHeaderBytes = 8;

// Writes all of `bytes`, retrying on EINTR and partial writes; false if nobody reads.
bool WriteAll(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Makes the child die plainly on a crash and never outlive the parent.
void IsolateChild(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(ChildProcess::kOrphanExit);  // died before prctl took effect
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);  // fails harmlessly for reserved ones
  }
  // Ctrl-C reaches the whole process group: the parent decides (it stops after this
  // measurement), so a candidate is not recorded as crashed by the user's keystroke.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);  // crashing candidates are expected; no core files
}

[[noreturn]] void ChildMain(int fd, pid_t parent, const ChildProcess::Body& body,
                            ChildProcess::Channel& channel) {
  IsolateChild(parent);
  int code = ChildProcess::kThrewExit;
  try {
    code = body(channel);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child process threw: %s\n", e.what());
  } catch (...) {
    std::fputs("child process threw a non-standard exception\n", stderr);
  }
  ::close(fd);
  ::_exit(code);
}

ChildExit FromWaitStatus(int wstatus) {
  ChildExit exit;
  if (WIFSIGNALED(wstatus)) {
    exit.kind = ChildExit::Kind::kSignaled;
    exit.signal = WTERMSIG(wstatus);
  } else {
    exit.kind = ChildExit::Kind::kExited;
    exit.code = WEXITSTATUS(wstatus);
  }
  return exit;
}

}  // namespace

std::string SignalText(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  const char* description = strsignal(signal);
  return absl::StrCat(abbrev != nullptr ? absl::StrCat("SIG", abbrev) : "unknown signal", " (signal ", signal,
                      description != nullptr ? ": " : "", description != nullptr ? description : "", ")");
}

std::string ChildExit::ToString() const {
  switch (kind) {
    case Kind::kExited:
      return absl::StrCat("exit code ", code);
    case Kind::kSignaled:
      return SignalText(signal);
    case Kind::kKilled:
      return "killed by the parent";
    case Kind::kLost:
      break;
  }
  return "not waited for";
}

void ChildProcess::Channel::Send(std::string_view payload) {
  if (payload.size() > kMaxMessageBytes) ::_exit(kSendFailedExit);
  std::string frame;
  const uint32_t length = static_cast<uint32_t>(payload.size());
  frame.append(reinterpret_cast<const char*>(&kMagic), sizeof(kMagic));
  frame.append(reinterpret_cast<const char*>(&length), sizeof(length));
  frame.append(payload);
  if (!WriteAll(fd_, frame)) ::_exit(kSendFailedExit);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(const Body& body) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    Channel channel(fds[1]);
    ChildMain(fds[1], parent, body, channel);
  }
  const int err = errno;
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(err)));
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, fds[0]));
}

ChildProcess::~ChildProcess() {
  if (!reaped_) Kill();
  ClosePipe();
}

void ChildProcess::ClosePipe() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

ChildProcess::Read ChildProcess::Next(Clock::time_point deadline, std::string* payload) {
  char chunk[1 << 16];
  while (true) {
    if (broken_) return Read::kBroken;
    if (buffer_.size() >= kHeaderBytes) {
      uint32_t magic = 0, length = 0;
      std::memcpy(&magic, buffer_.data(), sizeof(magic));
      std::memcpy(&length, buffer_.data() + sizeof(magic), sizeof(length));
      if (magic != kMagic || length > kMaxMessageBytes) {
        broken_ = true;
        error_ = absl::StrFormat("malformed message header from kernel process (magic 0x%08x, length %u)", magic,
                                 length);
        continue;
      }
      if (buffer_.size() - kHeaderBytes >= length) {
        payload->assign(buffer_, kHeaderBytes, length);
        buffer_.erase(0, kHeaderBytes + length);
        return Read::kMessage;
      }
    }
    if (fd_ < 0) return Read::kEnd;
    const int64_t left_ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left_ms <= 0) return Read::kTimedOut;
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left_ms, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      broken_ = true;
      error_ = absl::StrCat("poll: ", std::strerror(errno));
      continue;
    }
    if (ready == 0) continue;  // re-check the deadline
    const ssize_t n = ::read(fd_, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      broken_ = true;
      error_ = absl::StrCat("read: ", std::strerror(errno));
      continue;
    }
    if (n == 0) {
      ClosePipe();
      continue;  // a last complete message may be buffered
    }
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

ChildExit ChildProcess::Wait(Clock::time_point deadline) {
  if (reaped_) return exit_;
  ClosePipe();
  auto nap = std::chrono::microseconds(50);
  while (true) {
    int wstatus = 0;
    const pid_t r = ::waitpid(pid_, &wstatus, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      exit_ = FromWaitStatus(wstatus);
      return exit_;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {  // ECHILD: reaped elsewhere
      reaped_ = true;
      exit_ = ChildExit{};
      return exit_;
    }
    if (Clock::now() >= deadline) return Kill();
    std::this_thread::sleep_for(nap);
    nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(10));
  }
}

ChildExit ChildProcess::Kill() {
  if (reaped_) return exit_;
  ::kill(pid_, SIGKILL);
  int wstatus = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &wstatus, 0)) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  exit_ = ChildExit{};
  if (r == pid_) {
    exit_.kind = ChildExit::Kind::kKilled;
    exit_.signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
  }
  return exit_;
}

MeasureResult LostResult(ChildProcess::Read read, const ChildProcess& child, const ChildExit& exit,
                         double timeout_s) {
  using Read = ChildProcess::Read;
  MeasureResult result;
  result.status = MeasureStatus::kRuntimeError;
  if (read == Read::kTimedOut || (read == Read::kEnd && exit.kind == ChildExit::Kind::kKilled)) {
    result.status = MeasureStatus::kTimeout;
    result.message = absl::StrFormat("kernel did not finish within %gs", timeout_s);
  } else if (read == Read::kBroken) {
    result.message = child.error();
  } else if (exit.kind == ChildExit::Kind::kSignaled) {
    result.message = absl::StrCat("kernel crashed: ", SignalText(exit.signal));
  } else if (exit.kind == ChildExit::Kind::kExited && exit.code != 0) {
    result.message = absl::StrCat("kernel process exited with code ", exit.code, " without a result");
  } else if (read == Read::kMessage) {
    result.message = "malformed result from kernel process";
  } else if (child.partial_bytes() == 0) {
    result.message = "kernel process exited without a result";
  } else {
    result.message = absl::StrCat("kernel process sent an incomplete result (", child.partial_bytes(), " bytes)");
  }
  return result;
}

}  // namespace tune::measure
