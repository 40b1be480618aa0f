// src/viz/line_plot_layout.h — internal: where everything of a LinePlot goes
// (axis ranges, margins, ticks, labels, the legend box), as a plain function
// of the options, the series and the text metrics. line_plot.cpp paints this
// layout with cairo.
//
// Coordinates are page points, y downwards, origin at the top-left corner.
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "attn/viz/line_plot.h"
#include "text_metrics.h"

namespace attn::viz::detail {

namespace line_plot_style {
constexpr double kTickFont = 9, kLabelFont = 10, kTitleFont = 11, kLegendFont = 9;
constexpr double kTickLength = 3.5, kTickPad = 2.5, kLabelPad = 4, kOuterPad = 8;
constexpr double kTitleGap = 7;  // between the title and the axes
constexpr double kMargin = 0.05;  // matplotlib's axes.xmargin / ymargin
constexpr double kMinTickLabelGap = 14;  // between neighbouring x tick labels
// The legend: padding inside the box, the line sample, the gap before the
// label, the extra space between rows, and the box's distance from the axes.
constexpr double kLegendPad = 5, kLegendHandle = 22, kLegendGap = 6, kLegendRowGap = 5,
                 kLegendInset = 6;
}  // namespace line_plot_style

struct Box {
  double x = 0, y = 0, w = 0, h = 0;
  bool contains(double px, double py) const {
    return px >= x && px <= x + w && py >= y && py <= y + h;
  }
};

// One axis: the visible data range, its mapping to the page, and its ticks.
struct PlotAxis {
  double lo = 0, hi = 1;  // visible data range
  bool log = false;
  double p0 = 0, p1 = 1;  // page coordinates of lo and hi
  std::vector<double> ticks;
  std::vector<std::string> labels;
  std::vector<double> minor_ticks;  // unlabelled: 2..9 x 10^k on a log axis

  double t(double v) const { return log ? std::log10(v) : v; }
  double map(double v) const { return p0 + (t(v) - t(lo)) / (t(hi) - t(lo)) * (p1 - p0); }
  // Round ticks (powers of ten on a log axis), at most about `max_ticks`.
  void make_ticks(int max_ticks);
};

// The visible range: the data (or the fixed limits) plus matplotlib's 5%
// margin on each free end, in log space on a log axis.
PlotAxis make_plot_axis(double data_lo, double data_hi, std::optional<double> fixed_lo,
                        std::optional<double> fixed_hi, bool log);

// matplotlib's minor ticks of a log axis, 2..9 x 10^k strictly inside the
// range (none over more than 8 decades, none on a linear axis).
std::vector<double> log_minor_ticks(const PlotAxis& axis);

struct LegendLayout {
  bool shown = false;
  Box box;
  std::vector<std::size_t> entries;  // indices of the labelled series, in order
  double row = 0;  // height of one entry
  // Vertical centre of entry e, and the ends of its line sample.
  double entry_y(std::size_t e) const {
    return box.y + line_plot_style::kLegendPad + row * static_cast<double>(e) +
           (row - line_plot_style::kLegendRowGap) / 2;
  }
  double handle_x0() const { return box.x + line_plot_style::kLegendPad; }
  double handle_x1() const { return handle_x0() + line_plot_style::kLegendHandle; }
};

struct LinePlotLayout {
  PlotAxis x, y;
  Box axes;  // the plotting area
  double tick_line = 0;  // height of a line of tick labels
  double ytick_width = 0;  // the widest y tick label
  // Anchors of the text around the axes: top of the x tick labels and of the
  // x label, right (lower, once rotated) edge of the y label, bottom of the title.
  double xtick_top = 0, xlabel_top = 0, ylabel_x = 0, title_bottom = 0;
  LegendLayout legend;
  FigureSize size;
};

// Where `series` (not empty) and the labels go on a figure of options.width x
// options.height. ValueError if the labels leave no room for the axes.
LinePlotLayout layout_line_plot(const LinePlotOptions& options, const std::vector<Series>& series,
                                const TextMetrics& metrics);

// The legend box at `location` (not best or none) inside `axes`.
Box legend_box_at(LegendLocation location, const Box& axes, double w, double h);

// How much of the data a box at `box` would hide: the markers inside it plus
// the samples every 2 pt along each line that fall inside it.
double legend_coverage(const Box& box, const std::vector<Series>& series, const PlotAxis& x,
                       const PlotAxis& y);

}  // namespace attn::viz::detail
