// Text tables: column widths, alignment and the two styles.
#include "base/table.h"

#include <algorithm>

namespace tune::base {

std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                        const TableStyle& style) {
  const size_t columns = header.size();
  std::vector<size_t> width(columns);
  for (size_t c = 0; c < columns; ++c) width[c] = header[c].size();
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size() && c < columns; ++c) width[c] = std::max(width[c], r[c].size());
  }
  auto align = [&](size_t c) {
    if (c < style.align.size()) return style.align[c];
    return c == 0 ? Align::kLeft : Align::kRight;
  };
  auto line = [&](const std::vector<std::string>& cells, bool rule) {
    std::string s = style.markdown ? "|" : "";
    for (size_t c = 0; c < columns; ++c) {
      std::string cell = rule ? std::string(width[c], '-') : c < cells.size() ? cells[c] : "";
      std::string pad(width[c] - std::min(width[c], cell.size()), ' ');
      std::string text = align(c) == Align::kLeft ? cell + pad : pad + cell;
      if (style.markdown) {
        s += " " + text + " |";
      } else {
        if (c > 0) s += "  ";
        // No trailing blanks after a left-aligned last column.
        s += c + 1 == columns && align(c) == Align::kLeft ? cell : text;
      }
    }
    return s + "\n";
  };
  std::string out = line(header, false) + line({}, true);
  for (const auto& r : rows) out += line(r, false);
  return out;
}

void PrintTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                const TableStyle& style, std::FILE* out) {
  std::fputs(FormatTable(header, rows, style).c_str(), out);
}

}  // namespace tune::base
