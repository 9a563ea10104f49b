// `--html OUT.html`: one self-contained page (no network: no external script, font, style or
// image), so it can be mailed, attached to a ticket or opened offline. The plots are inline SVG
// drawn by plots.cc; a few lines of inline script only check, after layout, that every plot drew
// something, and record it on <body data-plots-drawn> (the headless-browser test reads it).
#include "report/plots.h"
#include "report/render.h"

namespace gms::report {
namespace {

constexpr const char* kStyle = R"(
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 24px;
       color: #1a1a1a; max-width: 1200px; }
h1 { font-size: 22px; margin: 0 0 8px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
pre.summary { background: #f6f6f6; padding: 10px; overflow-x: auto; font-size: 12px; }
.warnings li { color: #9a3b00; }
ol.offenders li { margin: 4px 0; }
figure { margin: 16px 0 24px; }
figcaption { font-size: 12px; color: #555; max-width: 960px; }
svg.plot { display: block; border: 1px solid #ddd; font: 12px sans-serif; }
svg.plot .title { font-size: 15px; font-weight: bold; }
svg.plot .axis-label { font-size: 13px; }
svg.plot .empty { fill: #888; font-size: 14px; }
table { border-collapse: collapse; margin: 4px 0; font-size: 13px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; white-space: nowrap; }
th { background: #f3f3f3; text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
p.note { margin: 2px 0; font-size: 12px; color: #555; }
)";

constexpr const char* kCheckScript = R"(
(function () {
  var plots = document.querySelectorAll('svg.plot');
  var drawn = 0;
  plots.forEach(function (svg) {
    var marks = 0;
    svg.querySelectorAll('.mark').forEach(function (m) {
      var box = m.getBBox();
      if (box.width > 0 || box.height > 0) marks++;
    });
    svg.setAttribute('data-marks-drawn', String(marks));
    if (marks > 0) drawn++;
  });
  document.body.setAttribute('data-plots', String(plots.length));
  document.body.setAttribute('data-plots-drawn', String(drawn));
})();
)";

void table_html(std::string& out, const Table& t) {
  out += "<section class=\"table\" id=\"table-" + html_escape(t.id) + "\">\n<h2>" + html_escape(t.title) + "</h2>\n";
  if (t.rows.empty()) {
    out += "<p class=\"note\">" + html_escape(t.empty) + "</p>\n";
  } else {
    out += "<table>\n<tr>";
    for (size_t c = 0; c < t.headers.size(); ++c)
      out += std::string("<th") + (t.numeric[c] ? " class=\"num\"" : "") + ">" + html_escape(t.headers[c]) + "</th>";
    out += "</tr>\n";
    for (const auto& row : t.rows) {
      out += "<tr>";
      for (size_t c = 0; c < row.size(); ++c)
        out += std::string("<td") + (c < t.numeric.size() && t.numeric[c] ? " class=\"num\"" : "") + ">" +
               html_escape(row[c]) + "</td>";
      out += "</tr>\n";
    }
    out += "</table>\n";
  }
  for (const std::string& n : t.notes) out += "<p class=\"note\">" + html_escape(n) + "</p>\n";
  out += "</section>\n";
}

void figure(std::string& out, const Plot& p) {
  out += "<figure>\n" + p.svg + "<figcaption>" + html_escape(p.caption) + "</figcaption>\n</figure>\n";
}

}  // namespace

bool write_html(const TraceSet& set, const Report& r, const ReportView& v, std::FILE* out) {
  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // Nothing may be fetched: the policy makes any accidental external reference fail visibly.
  page += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
          "script-src 'unsafe-inline'; img-src data:\">\n";
  page += "<title>gpumemshim report</title>\n<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
  page += "<h1>gpumemshim report</h1>\n<pre class=\"summary\">";
  for (const std::string& s : v.summary) page += html_escape(s) + "\n";
  page += "</pre>\n";
  if (!v.warnings.empty()) {
    page += "<section id=\"warnings\"><h2>Warnings</h2>\n<ul class=\"warnings\">\n";
    for (const std::string& w : v.warnings) page += "<li>" + html_escape(w) + "</li>\n";
    page += "</ul></section>\n";
  }
  page += "<section id=\"offenders\"><h2>Top offenders</h2>\n";
  if (r.offenders.empty()) {
    page += "<p class=\"note\">none found</p>\n";
  } else {
    page += "<p class=\"note\">In brackets: the time a fix would save, estimated.</p>\n<ol class=\"offenders\">\n";
    for (const std::string& o : v.offenders) {
      // The view numbers its lines for the terminal; the list numbers them here.
      page += "<li>" + html_escape(o.substr(o.find(". ") + 2)) + "</li>\n";
    }
    page += "</ol>\n";
  }
  page += "</section>\n<section id=\"plots\"><h2>Plots</h2>\n";
  figure(page, bandwidth_plot(set, r));
  figure(page, memory_plot(set));
  figure(page, fault_plot(set, r));
  figure(page, copies_plot(r));
  page += "</section>\n";
  for (const Table& t : v.tables) table_html(page, t);
  page += "<script>" + std::string(kCheckScript) + "</script>\n</body>\n</html>\n";
  return std::fwrite(page.data(), 1, page.size(), out) == page.size();
}

}  // namespace gms::report
