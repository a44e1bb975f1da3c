// Text tables: the one printer behind every table the command line and the benchmarks print.
#pragma once

#include <cstdio>
#include <string>
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

/// `rows` under `header`, each column as wide as its widest cell, one line per row ending in
/// '\n'. Cells beyond the header's columns are dropped; missing cells are empty.
std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                        const TableStyle& style = {});
/// FormatTable written to `out`.
void PrintTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                const TableStyle& style = {}, std::FILE* out = stdout);

}  // namespace tune::base
