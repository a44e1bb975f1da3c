// The one-line error report of every command.
#include "base/exit_code.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace tune::base {
namespace {

// A message from a file, a request or a daemon's reply reaches the terminal as one line with
// no control sequence in it.
TEST(FailTest, ReportsOneLineWithoutControlSequences) {
  testing::internal::CaptureStderr();
  const int code = Fail("tune", absl::InvalidArgumentError("model \x1b]0;owned\x07 'a\nb'\r ok"));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, kExitUsage);
  EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;
  EXPECT_EQ(err.find('\x07'), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << err;  // only the line's own end
  EXPECT_NE(err.find("tune: model "), std::string::npos) << err;
  EXPECT_NE(err.find("'a b'  ok"), std::string::npos) << err;
}

}  // namespace
}  // namespace tune::base
