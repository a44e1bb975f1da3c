// Tables: alignment and styles, and control characters escaped in every cell.
#include "base/table.h"

#include <random>
#include <string>

#include "gtest/gtest.h"
#include "tests/common/test_seed.h"

namespace tune::base {
namespace {

/// True when `text` holds nothing a terminal could take for a command: no ASCII control byte
/// but the line ends, no DEL, no byte outside printable ASCII except valid non-C1 UTF-8.
bool TerminalSafe(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9f) return false;
  }
  return EscapeControl(text) == text;  // and no byte outside valid UTF-8
}

TEST(Table, AlignsColumnsUnderTheHeader) {
  const std::string t = FormatTable({"id", "name", "n"}, {{"1", "a", "10"}, {"22", "bbb", "3"}},
                                    {{Align::kRight, Align::kLeft, Align::kRight}});
  EXPECT_EQ(t, "id  name   n\n--  ----  --\n 1  a     10\n22  bbb    3\n");
  EXPECT_EQ(FormatTable({"a", "b"}, {{"x", "y"}}, {.markdown = true}), "| a | b |\n| - | - |\n| x | y |\n");
}

TEST(Table, EscapesTerminalControlSequencesInCells) {
  EXPECT_EQ(EscapeControl("\x1b[2J\x1b]0;owned\x07"), "\\x1b[2J\\x1b]0;owned\\x07");
  EXPECT_EQ(EscapeControl("a\nb\rc\td\x7f"), "a\\nb\\rc\\td\\x7f");
  EXPECT_EQ(EscapeControl(std::string("nul\0end", 7)), "nul\\x00end");
  EXPECT_EQ(EscapeControl("\xc2\x9b" "31m"), "\\u009b31m");    // C1 CSI as UTF-8
  EXPECT_EQ(EscapeControl("\x9b" "31m"), "\\x9b31m");          // C1 CSI as a lone byte
  EXPECT_EQ(EscapeControl("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x99\x82"), "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x99\x82");
  EXPECT_EQ(EscapeControl("\xc0\x9b"), "\\xc0\\x9b");            // overlong form of CSI
  EXPECT_EQ(EscapeControl("\xed\xa0\x80"), "\\xed\\xa0\\x80");    // a surrogate
  EXPECT_EQ(EscapeControl("\xe2\x9c"), "\\xe2\\x9c");            // cut short

  const std::string t = FormatTable({"id", "name"}, {{"1", "\x1b[31mred\x1b[0m"}, {"2", "plain"}});
  EXPECT_EQ(t.find('\x1b'), std::string::npos) << t;
  EXPECT_NE(t.find("\\x1b[31mred\\x1b[0m"), std::string::npos) << t;
  // Widths are those of the escaped text: the rule is as wide as the escaped cell.
  EXPECT_NE(t.find(std::string(std::string("\\x1b[31mred\\x1b[0m").size(), '-')), std::string::npos) << t;
}

TEST(Table, RandomBytesNeverReachTheOutputUnescaped) {
  std::mt19937_64 rng = test::TestRng();
  std::uniform_int_distribution<int> byte(0, 255), len(0, 24);
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::vector<std::string>> rows(3);
    for (auto& r : rows) {
      for (int c = 0; c < 3; ++c) {
        std::string cell(static_cast<size_t>(len(rng)), '\0');
        for (char& ch : cell) ch = static_cast<char>(byte(rng));
        r.push_back(cell);
      }
    }
    for (bool markdown : {false, true}) {
      const std::string t = FormatTable({"a", "b", "c"}, rows, {.markdown = markdown});
      // Each line, without its '\n', is terminal-safe, and there are exactly 2 + 3 lines.
      size_t lines = 0, begin = 0;
      for (size_t end; (end = t.find('\n', begin)) != std::string::npos; begin = end + 1, ++lines)
        ASSERT_TRUE(TerminalSafe(t.substr(begin, end - begin))) << t;
      EXPECT_EQ(begin, t.size());
      EXPECT_EQ(lines, 5u);
    }
  }
}

}  // namespace
}  // namespace tune::base
