// The terminal report.
#include <algorithm>

#include "report/render.h"

namespace gms::report {
namespace {

void append_table(std::string& out, const Table& t) {
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
  for (const std::string& s : v.summary) out += s + "\n";
  if (!v.warnings.empty()) {
    out += "\nWarnings\n";
    for (const std::string& w : v.warnings) out += "  " + w + "\n";
  }
  for (const Table& t : v.tables) append_table(out, t);
  out += "\nTop offenders (in brackets: the time a fix would save, estimated)\n";
  if (v.offenders.empty()) out += "  none found\n";
  for (const std::string& o : v.offenders) out += "  " + o + "\n";
  return out;
}

}  // namespace gms::report
