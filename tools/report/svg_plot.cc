#include "report/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gms::report {

const char* const kPalette[8] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                 "#E69F00", "#56B4E9", "#000000", "#F0E442"};

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

constexpr double kCharWidth = 6.6;  // of the 12px sans-serif labels, for layout estimates

std::string num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

// Round steps (1, 2, 5 x 10^k) giving about `target` ticks over [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int target) {
  double range = hi - lo;
  if (!(range > 0)) range = 1;
  double raw = range / target;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double norm = raw / mag;
  double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  std::vector<double> ticks;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9 && ticks.size() < 50; v += step) {
    ticks.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  }
  return ticks;
}

std::string tick_label(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

std::string text_el(double x, double y, const std::string& anchor, const std::string& content,
                    const std::string& extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" +
         html_escape(content) + "</text>\n";
}

struct Legend {
  std::string svg;
  double height = 0;
};

Legend legend(const std::vector<PlotSeries>& series, double left, double right, double top) {
  Legend out;
  double x = left, y = top;
  for (const PlotSeries& s : series) {
    double w = 34 + kCharWidth * static_cast<double>(s.label.size()) + 16;
    if (x + w > right && x > left) {
      x = left;
      y += 18;
    }
    if (s.style == PlotSeries::Style::kDots) {
      out.svg += "<circle cx=\"" + num(x + 12) + "\" cy=\"" + num(y - 4) + "\" r=\"4\" fill=\"" + s.color + "\"/>";
    } else {
      out.svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(y - 4) + "\" x2=\"" + num(x + 26) + "\" y2=\"" + num(y - 4) +
                 "\" stroke=\"" + s.color + "\" stroke-width=\"2.5\"" +
                 (s.style == PlotSeries::Style::kDashedStep ? " stroke-dasharray=\"6 4\"" : "") + "/>";
    }
    out.svg += text_el(x + 32, y, "start", s.label);
    x += w;
  }
  out.height = series.empty() ? 0 : y - top + 18;
  return out;
}

}  // namespace

std::string render_svg(const XYChart& c) {
  const double W = c.width, H = c.height;
  double left = 78;
  for (const auto& [v, label] : c.y_labels) left = std::max(left, 24 + kCharWidth * static_cast<double>(label.size()));
  left = std::min(left, W / 3);
  const double right = W - 20;
  Legend leg = legend(c.series, left, right, 44);
  const double top = 44 + leg.height + 6;
  const double bottom = H - 48;
  const double x_span = c.x_max > c.x_min ? c.x_max - c.x_min : 1;
  const double y_span = c.y_max > c.y_min ? c.y_max - c.y_min : 1;
  auto X = [&](double v) { return left + (v - c.x_min) / x_span * (right - left); };
  auto Y = [&](double v) { return bottom - (v - c.y_min) / y_span * (bottom - top); };

  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" id=\"" + html_escape(c.id) +
                  "\" width=\"" + num(W) + "\" height=\"" + num(H) + "\" viewBox=\"0 0 " + num(W) + " " + num(H) +
                  "\" role=\"img\" aria-label=\"" + html_escape(c.title) + "\">\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + num(W) + "\" height=\"" + num(H) + "\" fill=\"#fff\"/>\n";
  s += text_el(W / 2, 22, "middle", c.title, " class=\"title\"");
  s += leg.svg + "\n";
  // Grid and ticks.
  std::string grid, labels;
  for (double t : nice_ticks(c.x_min, c.x_max, 8)) {
    if (t < c.x_min || t > c.x_max) continue;
    grid += "<line x1=\"" + num(X(t)) + "\" y1=\"" + num(top) + "\" x2=\"" + num(X(t)) + "\" y2=\"" + num(bottom) + "\"/>";
    labels += text_el(X(t), bottom + 16, "middle", tick_label(t));
  }
  if (c.series.empty()) {
    // Nothing drawn: numbers on the y axis would only suggest a scale that means nothing.
  } else if (c.y_labels.empty()) {
    for (double t : nice_ticks(c.y_min, c.y_max, 5)) {
      if (t < c.y_min || t > c.y_max) continue;
      grid += "<line x1=\"" + num(left) + "\" y1=\"" + num(Y(t)) + "\" x2=\"" + num(right) + "\" y2=\"" + num(Y(t)) + "\"/>";
      labels += text_el(left - 6, Y(t) + 4, "end", tick_label(t));
    }
  } else {
    for (const auto& [v, label] : c.y_labels) labels += text_el(left - 6, Y(v) + 4, "end", label);
    for (double b : c.y_bands)
      grid += "<line x1=\"" + num(left) + "\" y1=\"" + num(Y(b)) + "\" x2=\"" + num(right) + "\" y2=\"" + num(Y(b)) + "\"/>";
  }
  s += "<g class=\"grid\" stroke=\"#e4e4e4\">" + grid + "</g>\n";
  s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(right - left) + "\" height=\"" +
       num(bottom - top) + "\" fill=\"none\" stroke=\"#888\"/>\n";
  s += "<g class=\"ticks\">" + labels + "</g>\n";
  s += text_el((left + right) / 2, H - 12, "middle", c.x_label, " class=\"axis-label\"");
  double ly = (top + bottom) / 2;
  s += text_el(16, ly, "middle", c.y_label, " class=\"axis-label\" transform=\"rotate(-90 16 " + num(ly) + ")\"");

  s += "<g class=\"data\">\n";
  for (const PlotSeries& p : c.series) {
    if (p.points.empty()) continue;
    if (p.style == PlotSeries::Style::kDots) {
      s += "<g fill=\"" + p.color + "\" fill-opacity=\"0.75\"><title>" + html_escape(p.label) + "</title>";
      for (const auto& [x, y] : p.points) {
        s += "<circle class=\"mark\" cx=\"" + num(X(x)) + "\" cy=\"" + num(Y(y)) + "\" r=\"" + num(p.radius) + "\"/>";
      }
      s += "</g>\n";
      continue;
    }
    std::string d;
    double prev_y = 0;
    for (size_t i = 0; i < p.points.size(); ++i) {
      double x = X(p.points[i].first), y = Y(p.points[i].second);
      if (i == 0) d += "M" + num(x) + " " + num(y);
      else if (p.style == PlotSeries::Style::kLine) d += " L" + num(x) + " " + num(y);
      else d += " L" + num(x) + " " + num(prev_y) + " L" + num(x) + " " + num(y);
      prev_y = y;
    }
    s += "<path class=\"mark\" d=\"" + d + "\" fill=\"none\" stroke=\"" + p.color + "\" stroke-width=\"2\"" +
         (p.style == PlotSeries::Style::kDashedStep ? " stroke-dasharray=\"6 4\"" : "") + "><title>" +
         html_escape(p.label) + "</title></path>\n";
  }
  s += "</g>\n";
  if (c.series.empty() && !c.empty_message.empty()) {
    s += text_el((left + right) / 2, (top + bottom) / 2, "middle", c.empty_message, " class=\"empty\"");
  }
  s += "</svg>\n";
  return s;
}

std::string render_svg(const BarChart& c) {
  const double W = c.width;
  double label_w = 60;
  for (const Bar& b : c.bars) label_w = std::max(label_w, kCharWidth * static_cast<double>(b.label.size()) + 16);
  label_w = std::min(label_w, W / 4);
  double text_w = 0;
  for (const Bar& b : c.bars) text_w = std::max(text_w, kCharWidth * static_cast<double>(b.text.size()) + 12);
  text_w = std::min(text_w, W / 2);
  const double left = label_w + 10, right = W - text_w - 10;
  const double top = 40, bar_h = 22, gap = 10;
  const double bottom = top + std::max<size_t>(c.bars.size(), 1) * (bar_h + gap);
  const double H = bottom + 48;
  double max_v = 0;
  for (const Bar& b : c.bars) max_v = std::max(max_v, b.value);
  if (!(max_v > 0)) max_v = 1;
  std::vector<double> ticks = nice_ticks(0, max_v, 5);
  double axis_max = std::max(max_v, ticks.empty() ? max_v : ticks.back());
  auto X = [&](double v) { return left + v / axis_max * (right - left); };

  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" id=\"" + html_escape(c.id) +
                  "\" width=\"" + num(W) + "\" height=\"" + num(H) + "\" viewBox=\"0 0 " + num(W) + " " + num(H) +
                  "\" role=\"img\" aria-label=\"" + html_escape(c.title) + "\">\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + num(W) + "\" height=\"" + num(H) + "\" fill=\"#fff\"/>\n";
  s += text_el(W / 2, 22, "middle", c.title, " class=\"title\"");
  std::string grid, labels;
  for (double t : ticks) {
    grid += "<line x1=\"" + num(X(t)) + "\" y1=\"" + num(top - 4) + "\" x2=\"" + num(X(t)) + "\" y2=\"" + num(bottom) + "\"/>";
    labels += text_el(X(t), bottom + 16, "middle", tick_label(t));
  }
  s += "<g class=\"grid\" stroke=\"#e4e4e4\">" + grid + "</g>\n";
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top - 4) + "\" x2=\"" + num(left) + "\" y2=\"" + num(bottom) +
       "\" stroke=\"#888\"/>\n";
  s += "<g class=\"ticks\">" + labels + "</g>\n";
  s += text_el((left + right) / 2, H - 12, "middle", c.x_label, " class=\"axis-label\"");
  s += "<g class=\"data\">\n";
  for (size_t i = 0; i < c.bars.size(); ++i) {
    const Bar& b = c.bars[i];
    double y = top + static_cast<double>(i) * (bar_h + gap);
    double w = std::max(1.0, X(b.value) - left);
    s += text_el(left - 8, y + bar_h / 2 + 4, "end", b.label);
    s += "<rect class=\"mark\" x=\"" + num(left) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" +
         num(bar_h) + "\" fill=\"" + b.color + "\"><title>" + html_escape(b.label + ": " + b.text) + "</title></rect>\n";
    s += text_el(left + w + 6, y + bar_h / 2 + 4, "start", b.text);
  }
  s += "</g>\n";
  if (c.bars.empty() && !c.empty_message.empty()) {
    s += text_el((left + right) / 2, (top + bottom) / 2 + 4, "middle", c.empty_message, " class=\"empty\"");
  }
  s += "</svg>\n";
  return s;
}

}  // namespace gms::report
