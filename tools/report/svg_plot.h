#pragma once
// Small SVG charts for the HTML report, drawn by this code so that the page needs no script, font or
// library from anywhere: an x-y chart (lines, steps, dots) with axes, ticks, labels and a legend,
// and a horizontal bar chart. Every data mark carries class "mark" (the page's check counts them).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gms::report {

// Escapes text for HTML and SVG content and attribute values.
std::string html_escape(std::string_view text);

struct PlotSeries {
  enum class Style { kLine, kStep, kDashedStep, kDots };
  std::string label;
  std::string color;  // CSS color
  Style style = Style::kLine;
  std::vector<std::pair<double, double>> points;  // x ascending for lines and steps
  double radius = 2.5;                            // dots
};

struct XYChart {
  std::string id, title;
  std::string x_label, y_label;
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  // Labels at chosen y values instead of numeric ticks (bands of an address axis), with the
  // boundaries drawn as faint lines.
  std::vector<std::pair<double, std::string>> y_labels;
  std::vector<double> y_bands;
  std::vector<PlotSeries> series;
  std::string empty_message;  // drawn in the plot area when there is no series
  int width = 960, height = 340;
};

struct Bar {
  std::string label;
  double value = 0;
  std::string text;  // written after the bar
  std::string color;
};

struct BarChart {
  std::string id, title;
  std::string x_label;
  std::vector<Bar> bars;
  std::string empty_message;
  int width = 960;
};

std::string render_svg(const XYChart& chart);
std::string render_svg(const BarChart& chart);

// Colors that stay apart for the usual color vision deficiencies (Okabe and Ito).
extern const char* const kPalette[8];

}  // namespace gms::report
