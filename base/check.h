// TUNE_CHECK: aborts with file:line and a message when a programming invariant is broken.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

// Usage (any module):
//   TUNE_CHECK(index < size) << "index " << index << " out of range";
//   TUNE_CHECK_MSG(space != nullptr, "a strategy needs a space");
// A failing check prints "file:line: check failed: <condition>: <message>" to stderr and
// calls std::abort(). Checks are for bugs only (they are never compiled out); recoverable
// failures return absl::Status instead. The streamed message is only evaluated on failure.

namespace tune::internal {

/// Collects the message of a failed check; its destructor prints it and aborts.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition) {
    stream_ << file << ":" << line << ": check failed: " << condition;
  }
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;

  [[noreturn]] ~CheckFailure() {
    std::string text = stream_.str();
    std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
    std::abort();
  }

  /// An lvalue to stream into (a temporary cannot bind to CheckVoidify's operator&).
  CheckFailure& self() { return *this; }

  template <typename T>
  CheckFailure& operator<<(const T& value) {
    if (!has_message_) {
      stream_ << ": ";
      has_message_ = true;
    }
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
  bool has_message_ = false;
};

/// Turns the streaming expression into void so both arms of the ?: in TUNE_CHECK match.
/// operator& binds looser than << and tighter than ?:.
struct CheckVoidify {
  void operator&(CheckFailure&) {}
};

}  // namespace tune::internal

#define TUNE_CHECK(condition)                                                   \
  (__builtin_expect(static_cast<bool>(condition), 1))                           \
      ? (void)0                                                                 \
      : ::tune::internal::CheckVoidify() &                                      \
            ::tune::internal::CheckFailure(__FILE__, __LINE__, #condition).self()

#define TUNE_CHECK_MSG(condition, message) TUNE_CHECK(condition) << message
