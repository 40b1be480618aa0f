// attn/viz/line_plot.h — line and scatter plots (d2l's d2l.plot).
//
//   LinePlot plot({.xlabel = "Row (position)", .width = 430, .height = 200});
//   for (int j = 6; j < 10; ++j)
//     plot.plot(fmt::format("Col {}", j), positions, P_col[j], fmts[j - 6]);   // "-", "m--",
//     "g-.", "r:"
//   plot.save("out/positional");
//
// Axis ranges are automatic (the data plus a 5% margin, as matplotlib does)
// unless fixed; ticks fall on round values (1, 2, 2.5, 5 times a power of ten)
// or, on a log axis, on powers of ten. Light grey grid lines under the data.
// The legend goes where it covers the fewest data points (matplotlib's "best").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attn/core/tensor.h"
#include "attn/viz/color.h"
#include "attn/viz/figure.h"

namespace attn::viz {

enum class LineStyle { solid, dashed, dash_dot, dotted, none };
enum class Marker { none, circle, square, triangle, cross, plus, point };

struct Series {
  std::string label{};  // empty: left out of the legend
  std::vector<double> x{}, y{};
  LineStyle line = LineStyle::solid;
  Marker marker = Marker::none;
  std::optional<Color> color{};  // default: the next colour of the tab10 cycle
  double line_width = 1.5;  // points
  double marker_size = 6;  // points (diameter)
  double alpha = 1;  // opacity of line and markers
};

enum class LegendLocation {
  best,
  upper_right,
  upper_left,
  lower_left,
  lower_right,
  center_right,
  center_left,
  lower_center,
  upper_center,
  center,
  none
};

struct LinePlotOptions {
  std::string title{}, xlabel{}, ylabel{};
  // Fixed axis limits (d2l's xlim / ylim); unset ends follow the data.
  std::optional<double> xmin{}, xmax{}, ymin{}, ymax{};
  bool log_x = false, log_y = false;
  bool grid = true;
  LegendLocation legend = LegendLocation::best;
  double width = 340, height = 230;  // the whole figure, points
};

class LinePlot : public Figure {
 public:
  explicit LinePlot(LinePlotOptions options = {});

  // Adds a series; ValueError if it is empty, x and y differ in length, or a
  // value is NaN or infinite (the message names the series and the index).
  LinePlot& add(Series series);
  // A series styled by a matplotlib format string "[colour][marker][line]":
  // colours b g r c m y k w, markers o s ^ x + ., lines - -- -. :
  // ("-", "m--", "g-.", "r:", "o", "bo-"). A marker without a line draws
  // points only. ValueError on anything else.
  LinePlot& plot(std::string label, std::vector<double> x, std::vector<double> y,
                 std::string_view fmt = "-");
  LinePlot& plot(std::string label, const Tensor& x, const Tensor& y, std::string_view fmt = "-");
  // Points only (d2l's training points: circles at half opacity).
  LinePlot& scatter(std::string label, std::vector<double> x, std::vector<double> y,
                    Marker marker = Marker::circle, std::optional<Color> color = {},
                    double alpha = 0.5);

  const std::vector<Series>& series() const { return series_; }
  const LinePlotOptions& options() const { return options_; }

 protected:
  FigureSize draw(detail::Canvas& canvas) const override;

 private:
  LinePlotOptions options_;
  std::vector<Series> series_;
  int next_cycle_color_ = 0;
};

// Applies a matplotlib format string to `series` (see LinePlot::plot).
void apply_format(Series& series, std::string_view fmt);

}  // namespace attn::viz
