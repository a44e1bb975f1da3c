// Text tables: column widths, alignment and the two styles.
#include "base/table.h"

#include <algorithm>
#include <cstdint>

namespace tune::base {
namespace {

void AppendHex(std::string& out, const char* prefix, unsigned value, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += prefix;
  for (int d = digits - 1; d >= 0; --d) out += kHex[(value >> (4 * d)) & 0xf];
}

/// Length of the valid UTF-8 sequence starting at text[i] (2..4) and its code point; 0 when
/// the bytes there are not one (overlong forms, surrogates and values past U+10FFFF included).
size_t Utf8Sequence(std::string_view text, size_t i, uint32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t n = 0;
  uint32_t cp = 0, min = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2, cp = lead & 0x1f, min = 0x80;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3, cp = lead & 0x0f, min = 0x800;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4, cp = lead & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  *code_point = cp;
  return n;
}

}  // namespace

std::string EscapeControl(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c < 0x80) {  // ASCII control or DEL
      if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else AppendHex(out, "\\x", c, 2);
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t n = Utf8Sequence(text, i, &cp);
    if (n == 0) {
      AppendHex(out, "\\x", c, 2);
      ++i;
    } else if (cp <= 0x9f) {
      AppendHex(out, "\\u", cp, 4);
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

namespace {

/// FormatTable of cells already escaped.
std::string FormatEscaped(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
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

}  // namespace

std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                        const TableStyle& style) {
  std::vector<std::string> escaped_header;
  for (const std::string& h : header) escaped_header.push_back(EscapeControl(h));
  std::vector<std::vector<std::string>> escaped_rows;
  escaped_rows.reserve(rows.size());
  for (const auto& r : rows) {
    std::vector<std::string>& e = escaped_rows.emplace_back();
    for (size_t c = 0; c < r.size() && c < header.size(); ++c) e.push_back(EscapeControl(r[c]));
  }
  return FormatEscaped(escaped_header, escaped_rows, style);
}

void PrintTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                const TableStyle& style, std::FILE* out) {
  std::fputs(FormatTable(header, rows, style).c_str(), out);
}

}  // namespace tune::base
