// The terminal report.
#include <algorithm>
#include <string_view>

#include "report/render.h"

namespace gms::report {

std::string terminal_safe(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      // U+0080..U+009F: C1 controls, which some terminals take as the start of an escape sequence.
      auto c1 = static_cast<unsigned char>(s[++i]);
      out += "\\u00";
      out += kHex[c1 >> 4];
      out += kHex[c1 & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

namespace {

void append_table(std::string& out, const Table& raw) {
  // Names come from the trace: whatever bytes they hold reach the terminal escaped, and widths
  // are measured on what is printed.
  Table t = raw;
  t.title = terminal_safe(t.title);
  for (std::string& h : t.headers) h = terminal_safe(h);
  for (auto& row : t.rows)
    for (std::string& cell : row) cell = terminal_safe(cell);
  for (std::string& n : t.notes) n = terminal_safe(n);
  t.empty = terminal_safe(t.empty);
  out += "\n" + t.title + "\n";
  if (t.rows.empty()) {
    out += "  " + t.empty + "\n";
    for (const std::string& n : t.notes) out += "  " + n + "\n";
    return;
  }
  std::vector<size_t> width(t.headers.size(), 0);
  for (size_t c = 0; c < t.headers.size(); ++c) width[c] = t.headers[c].size();
  for (const auto& row : t.rows)
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = " ";
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string& cell = c < cells.size() ? cells[c] : std::string();
      std::string pad(width[c] - std::min(width[c], cell.size()), ' ');
      s += ' ';
      s += t.numeric[c] ? pad + cell : cell + pad;
      s += ' ';
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out += s + "\n";
  };
  line(t.headers);
  std::vector<std::string> rule;
  for (size_t w : width) rule.push_back(std::string(w, '-'));
  line(rule);
  for (const auto& row : t.rows) line(row);
  for (const std::string& n : t.notes) out += "  " + n + "\n";
}

}  // namespace

std::string render_text(const ReportView& v) {
  std::string out;
  for (const std::string& s : v.summary) out += terminal_safe(s) + "\n";
  if (!v.warnings.empty()) {
    out += "\nWarnings\n";
    for (const std::string& w : v.warnings) out += "  " + terminal_safe(w) + "\n";
  }
  for (const Table& t : v.tables) append_table(out, t);
  out += "\nTop offenders (in brackets: the time a fix would save, estimated)\n";
  if (v.offenders.empty()) out += "  none found\n";
  for (const std::string& o : v.offenders) out += "  " + terminal_safe(o) + "\n";
  return out;
}

}  // namespace gms::report
