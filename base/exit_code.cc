// Exit codes: the status -> exit code mapping and the one-line error report.
#include "base/exit_code.h"

#include <cstdio>
#include <string>

#include "base/table.h"

namespace tune::base {

int ExitCodeOf(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kUnavailable:
      return kExitUsage;
    default:
      return kExitFailure;
  }
}

int Fail(std::string_view who, int code, std::string_view message) {
  // One line, and no terminal control sequence from a file, a request or a daemon's reply.
  std::string line;
  for (char ch : message) line += (ch == '\n' || ch == '\r') ? ' ' : ch;
  line = EscapeControl(line);
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(who.size()), who.data(), line.c_str());
  return code;
}

int Fail(std::string_view who, const absl::Status& status) {
  return Fail(who, ExitCodeOf(status), std::string(status.message()));
}

}  // namespace tune::base
