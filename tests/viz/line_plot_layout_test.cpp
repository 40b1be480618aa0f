// Where the parts of a LinePlot go (src/viz/line_plot_layout.h, internal),
// computed without cairo from stand-in text metrics.
#include "viz/line_plot_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attn/core/error.h"
#include "fake_text_metrics.h"

using namespace attn::viz;
using namespace attn::viz::detail;
using namespace attn::viz::detail::line_plot_style;

namespace {

const attn::testing::FakeTextMetrics kMetrics;
constexpr double kEps = 1e-9;

Series line(std::vector<double> x, std::vector<double> y, std::string label = "",
            LineStyle style = LineStyle::solid, Marker marker = Marker::none) {
  Series s;
  s.label = std::move(label);
  s.x = std::move(x);
  s.y = std::move(y);
  s.line = style;
  s.marker = marker;
  return s;
}

std::vector<double> range(double lo, double hi, int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(lo + (hi - lo) * i / (n - 1));
  return v;
}

double widest(const std::vector<std::string>& labels) {
  double w = 0;
  for (const auto& s : labels) w = std::max(w, kMetrics.text_width(s, kTickFont));
  return w;
}

}  // namespace

TEST(LinePlotLayout, RangesHaveMatplotlibsMarginsExceptAtFixedEnds) {
  PlotAxis a = make_plot_axis(0, 10, {}, {}, false);
  EXPECT_DOUBLE_EQ(a.lo, -0.5);
  EXPECT_DOUBLE_EQ(a.hi, 10.5);
  a = make_plot_axis(0, 10, 0.0, {}, false);
  EXPECT_EQ(a.lo, 0.0);
  EXPECT_DOUBLE_EQ(a.hi, 10.5);
  a = make_plot_axis(1, 100, {}, {}, true);  // 5% of two decades on each side
  EXPECT_NEAR(std::log10(a.lo), -0.1, 1e-12);
  EXPECT_NEAR(std::log10(a.hi), 2.1, 1e-12);
  a = make_plot_axis(3, 3, {}, {}, false);  // flat data still gets a range
  EXPECT_LT(a.lo, 3);
  EXPECT_GT(a.hi, 3);
  a = make_plot_axis(1, 2, 5.0, {}, false);  // a fixed low end beyond all data
  EXPECT_EQ(a.lo, 5.0);
  EXPECT_GT(a.hi, 5.0);
}

TEST(LinePlotLayout, WideYTickLabelsWidenTheLeftMargin) {
  const LinePlotOptions o{.ylabel = "loss"};
  const LinePlotLayout narrow = layout_line_plot(o, {line({0, 1}, {0, 1})}, kMetrics);
  const LinePlotLayout wide = layout_line_plot(o, {line({0, 1}, {0, 123456})}, kMetrics);
  EXPECT_GT(wide.ytick_width, narrow.ytick_width);
  EXPECT_DOUBLE_EQ(wide.axes.x - narrow.axes.x, wide.ytick_width - narrow.ytick_width);
  for (const LinePlotLayout* L : {&narrow, &wide}) {
    EXPECT_DOUBLE_EQ(L->ytick_width, widest(L->y.labels));
    // The y label, then the tick labels, then the ticks, all on the page.
    EXPECT_GE(L->ylabel_x - kMetrics.line_height(kLabelFont), kOuterPad - kEps);
    EXPECT_LE(L->ylabel_x, L->axes.x - kTickLength - kTickPad - L->ytick_width);
  }
}

TEST(LinePlotLayout, XTickLabelsDoNotCrowd) {
  for (double width : {200.0, 340.0, 800.0})
    for (double hi : {1.0, 59.0, 123456.0, 2.5e6}) {
      SCOPED_TRACE("width " + std::to_string(width) + ", x up to " + std::to_string(hi));
      const LinePlotLayout L =
          layout_line_plot({.width = width}, {line(range(0, hi, 30), range(0, 1, 30))}, kMetrics);
      ASSERT_GE(L.x.ticks.size(), 2u);
      const double spacing = L.x.map(L.x.ticks[1]) - L.x.map(L.x.ticks[0]);
      EXPECT_GE(spacing, widest(L.x.labels) + kMinTickLabelGap);
      for (double t : L.x.ticks) {
        EXPECT_GE(t, L.x.lo);
        EXPECT_LE(t, L.x.hi);
      }
    }
}

TEST(LinePlotLayout, LastXTickLabelStaysOnThePage) {
  // A fixed right end on a round value puts a wide label at the axes' edge:
  // the right margin grows to make room for its right half.
  const LinePlotOptions o{.xmax = 100000.0, .width = 300};
  const LinePlotLayout L = layout_line_plot(o, {line({0, 100000}, {0, 1})}, kMetrics);
  ASSERT_EQ(L.x.ticks.back(), 100000.0);
  const double half = kMetrics.text_width(L.x.labels.back(), kTickFont) / 2;
  EXPECT_LE(L.x.map(L.x.ticks.back()) + half, o.width - kOuterPad + kEps);
  EXPECT_LT(L.axes.x + L.axes.w, o.width - kOuterPad - 4);
}

TEST(LinePlotLayout, TitleAndXLabelTakeTheirRoomFromTheAxes) {
  const std::vector<Series> data = {line({0, 1}, {0, 1})};
  const LinePlotLayout bare = layout_line_plot({}, data, kMetrics);
  const LinePlotLayout full =
      layout_line_plot({.title = "Loss", .xlabel = "epoch"}, data, kMetrics);
  EXPECT_GT(full.axes.y, bare.axes.y);
  EXPECT_LT(full.axes.y + full.axes.h, bare.axes.y + bare.axes.h);
  EXPECT_GE(full.title_bottom - kMetrics.line_height(kTitleFont), kOuterPad - kEps);
  EXPECT_LE(full.title_bottom, full.axes.y);
  EXPECT_GE(full.xlabel_top, full.xtick_top + full.tick_line);
  EXPECT_LE(full.xlabel_top + kMetrics.line_height(kLabelFont),
            full.size.height - kOuterPad + kEps);
  EXPECT_EQ(full.size.width, 340);
  EXPECT_EQ(full.size.height, 230);
}

TEST(LinePlotLayout, TooSmallForItsLabelsIsAnError) {
  const LinePlotOptions o{
      .title = "A title", .xlabel = "x", .ylabel = "y", .width = 80, .height = 60};
  EXPECT_THROW(layout_line_plot(o, {line({0, 1}, {0, 1})}, kMetrics), attn::ValueError);
}

TEST(LinePlotLayout, LogAxisTicksArePowersOfTenWithMinorTicksBetween) {
  const LinePlotOptions o{.log_x = true, .log_y = true};
  const LinePlotLayout L = layout_line_plot(o, {line({8, 16384}, {1e-4, 300})}, kMetrics);
  for (const PlotAxis* a : {&L.x, &L.y}) {
    ASSERT_GE(a->ticks.size(), 2u);
    for (double t : a->ticks) EXPECT_NEAR(std::log10(t), std::round(std::log10(t)), 1e-12) << t;
    ASSERT_FALSE(a->minor_ticks.empty());
    for (double t : a->minor_ticks) {
      EXPECT_GT(t, a->lo);
      EXPECT_LT(t, a->hi);
      const double mantissa = t / std::pow(10.0, std::floor(std::log10(t) + 1e-12));
      EXPECT_GE(mantissa, 2 - 1e-9) << t;
      EXPECT_LE(mantissa, 9 + 1e-9) << t;
    }
  }
  EXPECT_TRUE(log_minor_ticks(make_plot_axis(1, 100, {}, {}, false)).empty());
}

TEST(LinePlotLayout, BestLegendCoversNoData) {
  // A rising line crosses the upper right corner: the legend goes upper left.
  const std::vector<double> x = range(0, 1, 50);
  std::vector<double> falling;
  for (double v : x) falling.push_back(1 - v);
  LinePlotLayout L = layout_line_plot({}, {line(x, x, "rising")}, kMetrics);
  ASSERT_TRUE(L.legend.shown);
  const Box upper_left =
      legend_box_at(LegendLocation::upper_left, L.axes, L.legend.box.w, L.legend.box.h);
  EXPECT_EQ(L.legend.box.x, upper_left.x);
  EXPECT_EQ(L.legend.box.y, upper_left.y);
  EXPECT_EQ(legend_coverage(L.legend.box, {line(x, x)}, L.x, L.y), 0);
  // A falling one leaves the upper right (matplotlib's first choice) free.
  L = layout_line_plot({}, {line(x, falling, "falling")}, kMetrics);
  const Box upper_right =
      legend_box_at(LegendLocation::upper_right, L.axes, L.legend.box.w, L.legend.box.h);
  EXPECT_EQ(L.legend.box.x, upper_right.x);
  EXPECT_EQ(L.legend.box.y, upper_right.y);
  // Markers count too: points in the upper left push it elsewhere.
  const std::vector<Series> both = {
      line(x, x, "rising"), line({0.05, 0.1}, {0.95, 0.9}, "pts", LineStyle::none, Marker::circle)};
  L = layout_line_plot({}, both, kMetrics);
  EXPECT_EQ(legend_coverage(L.legend.box, both, L.x, L.y), 0);
  EXPECT_NE(L.legend.box.y, upper_left.y);
}

TEST(LinePlotLayout, LegendListsLabelledSeriesInsideTheAxes) {
  const std::vector<Series> data = {line({0, 1}, {0, 1}, "a"), line({0, 1}, {1, 0}),
                                    line({0, 1}, {0.5, 0.5}, "a much longer label")};
  for (int loc = 0; loc < static_cast<int>(LegendLocation::none); ++loc) {
    SCOPED_TRACE("location " + std::to_string(loc));
    const LinePlotLayout L =
        layout_line_plot({.legend = static_cast<LegendLocation>(loc)}, data, kMetrics);
    ASSERT_TRUE(L.legend.shown);
    EXPECT_EQ(L.legend.entries, (std::vector<std::size_t>{0, 2}));
    const Box& b = L.legend.box;
    EXPECT_GE(b.x, L.axes.x + kLegendInset - kEps);
    EXPECT_LE(b.x + b.w, L.axes.x + L.axes.w - kLegendInset + kEps);
    EXPECT_GE(b.y, L.axes.y + kLegendInset - kEps);
    EXPECT_LE(b.y + b.h, L.axes.y + L.axes.h - kLegendInset + kEps);
    // Each label fits in the box after its line sample.
    EXPECT_LE(
        L.legend.handle_x1() + kLegendGap + kMetrics.text_width("a much longer label", kLegendFont),
        b.x + b.w - kLegendPad + kEps);
    EXPECT_LT(L.legend.entry_y(1) + kMetrics.line_height(kLegendFont) / 2, b.y + b.h);
    EXPECT_GT(L.legend.entry_y(0) - kMetrics.line_height(kLegendFont) / 2, b.y);
  }
  EXPECT_FALSE(layout_line_plot({.legend = LegendLocation::none}, data, kMetrics).legend.shown);
  EXPECT_FALSE(layout_line_plot({}, {line({0, 1}, {0, 1})}, kMetrics).legend.shown);
}
