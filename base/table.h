// Text tables: the one printer behind every table the command line and the benchmarks print.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace tune::base {

enum class Align { kLeft, kRight };

struct TableStyle {
  /// Per-column alignment; columns beyond the list: the first left, the others right.
  std::vector<Align> align;
  /// false: columns two spaces apart, a dashed rule under the header. true: a Markdown table
  /// ("| a | b |", a "| --- |" rule), for pasting into documents.
  bool markdown = false;
};

/// `text` with everything a terminal could take for a command made visible: ASCII control
/// characters as "\n", "\r", "\t" or "\xHH" (DEL too), C1 controls (U+0080..U+009F) as
/// "\u00HH", and bytes that are not part of valid UTF-8 as "\xHH". Printable text, valid UTF-8
/// included, is unchanged.
std::string EscapeControl(std::string_view text);

/// `rows` under `header`, each column as wide as its widest cell, one line per row ending in
/// '\n'. Cells beyond the header's columns are dropped; missing cells are empty. Every cell
/// and header passes through EscapeControl first, so a table's text never carries terminal
/// control sequences, whatever its cells hold.
std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                        const TableStyle& style = {});
/// FormatTable written to `out`.
void PrintTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                const TableStyle& style = {}, std::FILE* out = stdout);

}  // namespace tune::base
