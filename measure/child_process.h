// ChildProcess: runs a function in an isolated forked child that streams messages back over a pipe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "measure/measure_result.h"

namespace tune::measure {

/// How a child process ended.
struct ChildExit {
  enum class Kind {
    kExited,    // exited by itself: `code`
    kSignaled,  // a signal it did not catch ended it: `signal`
    kKilled,    // the parent SIGKILLed it (deadline passed or broken messages)
    kLost,      // it could not be waited for (reaped elsewhere, e.g. SIGCHLD ignored)
  };
  Kind kind = Kind::kLost;
  int code = 0;    // exit status when kExited
  int signal = 0;  // terminating signal when kSignaled

  /// Exited by itself with status 0.
  bool Clean() const { return kind == Kind::kExited && code == 0; }
  /// "exit code 7", "SIGSEGV (signal 11: Segmentation fault)", "killed by the parent" or
  /// "not waited for".
  std::string ToString() const;
};

/// "SIGSEGV (signal 11: Segmentation fault)": a signal's name, number and description.
std::string SignalText(int signal);

/// Runs a function (the body) in a child made by fork (no exec) and reads the
/// length-prefixed messages it sends, with deadlines. Kernel code and device drivers run in
/// such children so that a crash, a hang or a corrupted process costs one measurement.
///
/// Every child is set up the same way before its body runs: it dies with the parent
/// (PR_SET_PDEATHSIG SIGKILL; it exits with kOrphanExit if the parent is already gone),
/// every signal has its default disposition except SIGINT and SIGTERM, which it ignores (the
/// parent decides what Ctrl-C stops; the child dies with it or at its deadline), no signal
/// is blocked, core files are off (RLIMIT_CORE 0), and the pipe's read end is closed. Other
/// descriptors are inherited, as fork leaves them.
///
/// Not thread-safe: one thread drives one ChildProcess. Forking from a process with other
/// threads copies only the calling one; a body that takes a lock held elsewhere at the fork
/// deadlocks and surfaces as a timeout.
class ChildProcess {
 public:
  using Clock = std::chrono::steady_clock;

  /// Largest message accepted; a longer length in a header means garbage.
  static constexpr uint32_t kMaxMessageBytes = uint32_t{1} << 30;
  /// Exit codes of the child machinery itself (a body should use others).
  static constexpr int kSendFailedExit = 120;  // Send found nobody reading
  static constexpr int kThrewExit = 121;       // the body threw
  static constexpr int kOrphanExit = 122;      // the parent died before the child was set up

  /// The child's end of the pipe.
  class Channel {
   public:
    /// Sends one message. A child whose parent no longer reads has nothing left to do: it
    /// _exits with kSendFailedExit (or dies of SIGPIPE).
    void Send(std::string_view payload);
    /// The pipe's write end, for a body that hands it to other code. Bytes written there
    /// directly must be whole messages as Send frames them.
    int fd() const { return fd_; }

   private:
    friend class ChildProcess;
    explicit Channel(int fd) : fd_(fd) {}
    int fd_;
  };

  /// Runs in the child; returns the child's exit status. It may also _exit itself. It gets a
  /// copy of the parent's memory at the fork, so references into the parent's data work.
  using Body = std::function<int(Channel& channel)>;

  /// Forks a child running `body` (stdout and stderr are flushed first). Internal when the
  /// pipe or the fork fails ("pipe: ..." / "fork: ...").
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const Body& body);

  /// A child still running is SIGKILLed and reaped: a ChildProcess never leaves a zombie.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  enum class Read {
    kMessage,   // *payload holds the next message
    kEnd,       // the child closed its end (exited, or closed the pipe) before another message
    kTimedOut,  // no complete message by the deadline; the child still runs
    kBroken,    // garbage on the pipe or an I/O error: see error()
  };
  /// The next message, waiting at most until `deadline` (a message already received is
  /// returned even after it). After kEnd or kBroken, every later call returns the same.
  Read Next(Clock::time_point deadline, std::string* payload);
  /// Why Next returned kBroken.
  const std::string& error() const { return error_; }
  /// Bytes of an incomplete message received so far (after kEnd: what the child left).
  size_t partial_bytes() const { return buffer_.size(); }

  /// Closes the pipe and waits for the child to exit until `deadline`, then SIGKILLs it;
  /// reaps it. Later calls (and Kill) return the same.
  ChildExit Wait(Clock::time_point deadline);
  /// SIGKILLs the child now and reaps it.
  ChildExit Kill();

  pid_t pid() const { return pid_; }

 private:
  ChildProcess(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  void ClosePipe();

  pid_t pid_;
  int fd_;
  std::string buffer_;  // received bytes not yet returned as messages
  std::string error_;
  bool broken_ = false;
  bool reaped_ = false;
  ChildExit exit_;
};

/// The record of a build whose child gave no usable result: `read` is how reading its
/// result ended (kMessage when the message was malformed), `exit` how the child ended.
/// timeout "kernel did not finish within Xs" when the deadline passed (kTimedOut, or the
/// child closed the pipe and was killed at the deadline); otherwise runtime_error with the
/// pipe's error, "kernel crashed: SIGSEGV (signal 11: Segmentation fault)", "kernel process
/// exited with code N without a result", "malformed result from kernel process", "kernel
/// process exited without a result" or "kernel process sent an incomplete result (N bytes)".
/// Sets status and message only.
MeasureResult LostResult(ChildProcess::Read read, const ChildProcess& child, const ChildExit& exit,
                         double timeout_s);

}  // namespace tune::measure
