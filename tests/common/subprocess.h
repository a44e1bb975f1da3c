// Running a program as a child process from a test: capture its output, exit code, or kill it.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tune::test {

/// How a child process ended and what it wrote.
struct ProcessResult {
  bool started = false;
  bool exited = false;     // exited normally; exit_code is valid
  int exit_code = -1;
  int term_signal = 0;     // the signal that ended it, when it did not exit
  bool hit_limit = false;  // the test's safety limit ran out and the child was SIGKILLed
  std::string out, err;
};

inline std::ostream& operator<<(std::ostream& os, const ProcessResult& r) {
  os << "{exited=" << r.exited << " code=" << r.exit_code << " signal=" << r.term_signal
     << " hit_limit=" << r.hit_limit << "\n--- stdout ---\n"
     << r.out << "\n--- stderr ---\n"
     << r.err << "}";
  return os;
}

namespace internal {

inline void DecodeWaitStatus(int status, ProcessResult* r) {
  if (WIFEXITED(status)) {
    r->exited = true;
    r->exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r->term_signal = WTERMSIG(status);
  }
}

// Forks and execs argv[0] (a path) in `cwd` with stdin from /dev/null and stdout/stderr on
// `out_fd`/`err_fd`. Returns the pid, or -1. Only async-signal-safe calls after fork.
inline pid_t Spawn(const std::vector<std::string>& argv, const std::string& cwd, int out_fd, int err_fd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) _exit(126);
  if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) _exit(126);
  ::execv(args[0], args.data());
  _exit(127);
}

}  // namespace internal

/// Runs `argv` (argv[0] is the program's path) in directory `cwd` and waits for it, capturing
/// stdout and stderr. `limit_s` only guards against a hung child (it is then SIGKILLed and
/// hit_limit set); it is not a timing assertion.
inline ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& cwd,
                                double limit_s = 300) {
  ProcessResult r;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe failed";
    return r;
  }
  pid_t pid = internal::Spawn(argv, cwd, out_pipe[1], err_pipe[1]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (pid < 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    ADD_FAILURE() << "fork failed";
    return r;
  }
  r.started = true;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      r.hit_limit = true;
      break;
    }
    int n = ::poll(fds, 2, 100);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  internal::DecodeWaitStatus(status, &r);
  return r;
}

/// A child process running in the background, its stdout and stderr going to files.
/// The destructor SIGKILLs and reaps it if it is still running.
class Subprocess {
 public:
  Subprocess() = default;
  ~Subprocess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      Wait();
    }
  }
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  /// Starts `argv` in `cwd`; false (and a test failure) when it cannot.
  bool Start(const std::vector<std::string>& argv, const std::string& cwd, const std::string& out_path,
             const std::string& err_path) {
    int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0 || err_fd < 0) {
      ADD_FAILURE() << "cannot open " << out_path << " or " << err_path;
      return false;
    }
    reaped_ = false;  // a Subprocess may run a child again once the last one ended
    result_ = {};
    pid_ = internal::Spawn(argv, cwd, out_fd, err_fd);
    ::close(out_fd);
    ::close(err_fd);
    if (pid_ < 0) ADD_FAILURE() << "fork failed";
    return pid_ > 0;
  }

  pid_t pid() const { return pid_; }

  /// True once the child has ended (it is reaped then; see result()).
  bool Finished() {
    if (reaped_) return true;
    int status = 0;
    pid_t got = ::waitpid(pid_, &status, WNOHANG);
    if (got == pid_) {
      reaped_ = true;
      internal::DecodeWaitStatus(status, &result_);
    }
    return reaped_;
  }

  void Kill(int signal) {
    if (!reaped_) ::kill(pid_, signal);
  }

  /// Waits for the child to end and returns how it ended (no output captured here).
  const ProcessResult& Wait() {
    if (!reaped_) {
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      reaped_ = true;
      internal::DecodeWaitStatus(status, &result_);
    }
    return result_;
  }

  const ProcessResult& result() const { return result_; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  ProcessResult result_{.started = true};
};

/// No child process of this test process is left (none running, none unreaped).
inline void ExpectNoChildren() {
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace tune::test
