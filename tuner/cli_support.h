// What the commands that run tuning loops share: the live progress line, the stop signals,
// and the command line as recorded in a run.
#pragma once

#include <string>

namespace tune::tuner {

/// A progress display on stderr: on a terminal one line rewritten in place, otherwise one line
/// per Show.
class LiveLine {
 public:
  LiveLine();
  ~LiveLine() { Finish(); }
  /// Shows `text`; on a terminal the line stays on screen (ends) when `end` is true.
  void Show(const std::string& text, bool end = false);
  /// Ends a line a terminal still shows open.
  void Finish();
  bool tty() const { return tty_; }

 private:
  bool tty_;
  bool open_ = false;
};

/// Installs handlers for SIGINT and SIGTERM: the first one sets StopRequested() (the loop stops
/// after the batch in flight, records kept); a second one ends the process at once.
void InstallStopHandlers();
/// True once a stop signal arrived. Async-signal-safe to set, cheap to read.
bool StopRequested();

/// argv joined by spaces (the command a run records).
std::string JoinArgs(int argc, char** argv);

}  // namespace tune::tuner
