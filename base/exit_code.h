// Exit codes of the command line, and the one mapping from absl::Status to them.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace tune::base {

inline constexpr int kExitOk = 0;
/// The work was attempted and failed (I/O, a database or RPC error mid-way, a strategy bug).
inline constexpr int kExitFailure = 1;
/// The request cannot be carried out as given: a bad flag, model, shape, config or file, a
/// missing device or daemon, a refused token. Nothing was written.
inline constexpr int kExitUsage = 2;

/// kExitUsage for the codes that say the input or the environment is wrong (InvalidArgument,
/// NotFound, FailedPrecondition, AlreadyExists, OutOfRange, PermissionDenied, Unauthenticated,
/// Unimplemented, Unavailable), kExitFailure for the others, kExitOk for ok.
int ExitCodeOf(const absl::Status& status);

/// Prints "`who`: `message`" as one line on stderr (line breaks in the message become
/// spaces) and returns `code`.
int Fail(std::string_view who, int code, std::string_view message);
/// Fail(who, ExitCodeOf(status), status.message()).
int Fail(std::string_view who, const absl::Status& status);

}  // namespace tune::base
