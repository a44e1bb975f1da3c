// The live progress line, the stop signals and the recorded command line.
#include "tuner/cli_support.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace tune::tuner {
namespace {

std::atomic<bool> g_stop_requested{false};

extern "C" void RequestStop(int) { g_stop_requested.store(true); }

}  // namespace

LiveLine::LiveLine() : tty_(isatty(STDERR_FILENO)) {}

void LiveLine::Show(const std::string& text, bool end) {
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    if (end) std::fprintf(stderr, "\n");
    open_ = !end;
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  std::fflush(stderr);
}

void LiveLine::Finish() {
  if (open_) std::fprintf(stderr, "\n");
  open_ = false;
}

void InstallStopHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = RequestStop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;  // a second signal ends the process at once
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool StopRequested() { return g_stop_requested.load(); }

std::string JoinArgs(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

}  // namespace tune::tuner
