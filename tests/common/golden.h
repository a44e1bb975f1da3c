// Golden texts written as raw string literals in tests.
#pragma once

#include <string>

namespace tune::test {

/// `text` without the newline that follows the opening R"( of a raw string literal.
inline std::string Golden(const char* text) {
  std::string s = text;
  return s.empty() || s[0] != '\n' ? s : s.substr(1);
}

}  // namespace tune::test
