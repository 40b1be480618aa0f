// Where the parts of a Heatmaps figure go (src/viz/heatmap_layout.h, internal),
// computed without cairo from stand-in text metrics.
#include "viz/heatmap_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fake_text_metrics.h"

using namespace attn::viz;
using namespace attn::viz::detail;
using namespace attn::viz::detail::heatmap_style;

namespace {

const attn::testing::FakeTextMetrics kMetrics;

HeatmapLayout layout(const HeatmapOptions& o, HeatmapGrid g, double vmin = 0, double vmax = 1) {
  return layout_heatmaps(o, g, vmin, vmax, kMetrics);
}

// Every text block of the layout lies on the page, at least kOuterPad from its edges.
void expect_text_on_page(const HeatmapOptions& o, const HeatmapGrid& g, const HeatmapLayout& L) {
  const double line = kMetrics.line_height(kLabelFont), eps = 1e-9;
  const double left = kOuterPad - eps, right = L.size.width - kOuterPad + eps;
  const double top = kOuterPad - eps, bottom = L.size.height - kOuterPad + eps;
  EXPECT_GE(L.origin_x + L.ytick_right - L.yticks.extent, left);  // y tick labels
  if (!o.ylabel.empty()) {
    EXPECT_GE(L.origin_x + L.ylabel_x - line, left);
  }
  if (!o.row_labels.empty()) {
    EXPECT_GE(L.origin_x + L.row_label_x - line, left);
  }
  EXPECT_LE(L.origin_y + L.xtick_top + L.xticks.extent, bottom);  // x tick labels
  if (!o.xlabel.empty()) {
    EXPECT_LE(L.origin_y + L.xlabel_top + line, bottom);
  }
  if (!o.title.empty()) {
    const double w = kMetrics.text_width(o.title, kFigureTitleFont, true);
    EXPECT_GE(L.origin_y + L.figure_title_bottom - kMetrics.line_height(kFigureTitleFont), top);
    EXPECT_GE(L.origin_x + L.grid_w / 2 - w / 2, left);
    EXPECT_LE(L.origin_x + L.grid_w / 2 + w / 2, right);
  }
  if (!o.titles.empty()) {
    EXPECT_GE(L.origin_y + L.column_title_bottom - line, top);
  }
  if (L.colorbar) {
    double widest = 0;
    for (const auto& s : L.colorbar_labels)
      widest = std::max(widest, kMetrics.text_width(s, kTickFont));
    EXPECT_LE(L.origin_x + L.colorbar_x + L.colorbar_w + kTickLength + kTickPad + widest, right);
  }
  EXPECT_LE(L.origin_x + L.grid_w, right);
  if (!L.xticks.rotated) {  // upright x tick labels, centred under their cells
    const double first = kMetrics.text_width(L.xticks.label.front(), kTickFont);
    const double last = kMetrics.text_width(L.xticks.label.back(), kTickFont);
    EXPECT_GE(L.origin_x + L.cell_center(L.xticks.index.front()) - first / 2, left);
    EXPECT_LE(L.origin_x + L.panel_x(g.cols - 1) + L.cell_center(L.xticks.index.back()) + last / 2,
              right);
  }
}

}  // namespace

TEST(HeatmapLayout, ColorbarOfTheUnitRangeShowsBothEnds) {
  // Short and tall bars give 2 to 8 ticks; 0 and 1 are always among them, at
  // the bar's bottom and top.
  for (std::int64_t q : {1, 2, 5, 10, 40, 100, 400}) {
    SCOPED_TRACE("Q = " + std::to_string(q));
    const HeatmapLayout L = layout({}, {.q = q, .k = 4});
    ASSERT_TRUE(L.colorbar);
    ASSERT_GE(L.colorbar_ticks.size(), 2u);
    EXPECT_EQ(L.colorbar_ticks.front(), 0.0);
    EXPECT_EQ(L.colorbar_ticks.back(), 1.0);
    EXPECT_DOUBLE_EQ(L.colorbar_tick_y.front(), L.colorbar_y + L.colorbar_h);
    EXPECT_DOUBLE_EQ(L.colorbar_tick_y.back(), L.colorbar_y);
    EXPECT_EQ(std::stod(L.colorbar_labels.front()), 0.0);
    EXPECT_EQ(std::stod(L.colorbar_labels.back()), 1.0);
  }
}

TEST(HeatmapLayout, ColorbarTicksStayInsideTheBar) {
  const HeatmapLayout L = layout({}, {.q = 6, .k = 6}, 0.013, 0.31);
  ASSERT_FALSE(L.colorbar_ticks.empty());
  for (double y : L.colorbar_tick_y) {
    EXPECT_GE(y, L.colorbar_y);
    EXPECT_LE(y, L.colorbar_y + L.colorbar_h);
  }
  const HeatmapLayout none = layout({.colorbar = false}, {.q = 6, .k = 6});
  EXPECT_TRUE(none.colorbar_ticks.empty());
  EXPECT_LT(none.size.width, L.size.width);
}

TEST(HeatmapLayout, LongFigureTitleWidensTheFigure) {
  const HeatmapOptions plain;
  const HeatmapOptions titled{.title = "A very very very long figure title over a tiny matrix"};
  const HeatmapLayout a = layout(plain, {.q = 2, .k = 2});
  const HeatmapLayout b = layout(titled, {.q = 2, .k = 2});
  EXPECT_GT(b.size.width, a.size.width);
  EXPECT_GE(b.size.width,
            kMetrics.text_width(titled.title, kFigureTitleFont, true) + 2 * kOuterPad);
  EXPECT_GT(b.size.height, a.size.height);  // a line for the title
  EXPECT_EQ(b.cell, a.cell);  // the matrix itself is unchanged
  expect_text_on_page(titled, {.q = 2, .k = 2}, b);
}

TEST(HeatmapLayout, ColumnTitlesGoBetweenTheFigureTitleAndThePanels) {
  const HeatmapOptions o{.titles = {"Head 1", "Head 2"}, .title = "Attention"};
  const HeatmapLayout L = layout(o, {.cols = 2, .q = 4, .k = 4});
  EXPECT_LT(L.column_title_bottom, 0);
  EXPECT_LE(L.figure_title_bottom, L.column_title_bottom - kMetrics.line_height(kTitleFont));
  expect_text_on_page(o, {.cols = 2, .q = 4, .k = 4}, L);
}

TEST(HeatmapLayout, RowLabelsYLabelAndTickLabelsDoNotOverlap) {
  const HeatmapOptions o{.ylabel = "Query positions",
                         .row_labels = {"Layer 1", "Layer 2"},
                         .yticklabels = {"un", "deux", "trois", "<eos>"}};
  const HeatmapGrid g{.rows = 2, .cols = 3, .q = 4, .k = 5};
  const HeatmapLayout L = layout(o, g);
  const double line = kMetrics.line_height(kLabelFont);
  // From the left: row label, y label, tick labels, ticks, panel.
  EXPECT_LE(L.row_label_x, L.ylabel_x - line);
  EXPECT_LE(L.ylabel_x, L.ytick_right - L.yticks.extent);
  EXPECT_LE(L.ytick_right, -kTickLength);
  EXPECT_DOUBLE_EQ(L.yticks.extent, kMetrics.text_width("<eos>", kTickFont));
  expect_text_on_page(o, g, L);
}

TEST(HeatmapLayout, WordsRotateOnlyWhenWiderThanACell) {
  // Words that fit above their cells stay upright; the x label block is one line.
  const HeatmapOptions upright{.xticklabels = {"x", "y", "z", "w"}, .cell_size = 20};
  HeatmapLayout L = layout(upright, {.q = 1, .k = 4});
  EXPECT_FALSE(L.xticks.rotated);
  EXPECT_EQ(L.xticks.index, (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_DOUBLE_EQ(L.xticks.extent, kMetrics.line_height(kTickFont));

  // Longer words are rotated, still one per cell, and push the x label down.
  const HeatmapOptions rotated{.xticklabels = {"i", "'m", "home", "<eos>"}, .cell_size = 20};
  L = layout(rotated, {.q = 1, .k = 4});
  EXPECT_TRUE(L.xticks.rotated);
  EXPECT_EQ(L.xticks.label, rotated.xticklabels);
  EXPECT_DOUBLE_EQ(L.xticks.extent, kMetrics.text_width("<eos>", kTickFont));
  EXPECT_DOUBLE_EQ(L.xlabel_top, L.xtick_top + L.xticks.extent + kLabelPad);
  expect_text_on_page(rotated, {.q = 1, .k = 4}, L);
}

TEST(HeatmapLayout, IndexTicksThinOutSoThatLabelsDoNotTouch) {
  for (std::int64_t n : {4, 10, 60, 100, 300}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const HeatmapLayout L = layout({}, {.q = n, .k = n});
    for (const IndexTicks* t : {&L.xticks, &L.yticks}) {
      ASSERT_FALSE(t->index.empty());
      EXPECT_EQ(t->index.front(), 0);
      EXPECT_LT(t->index.back(), n);
      EXPECT_EQ(t->label.front(), "0");
      if (t->index.size() < 2) continue;
      const double spacing = static_cast<double>(t->index[1] - t->index[0]) * L.cell;
      EXPECT_GE(spacing, 16.0);
      double widest = 0;
      for (const auto& s : t->label) widest = std::max(widest, kMetrics.text_width(s, kTickFont));
      if (t == &L.xticks) {  // side by side on the x axis
        EXPECT_GE(spacing, widest + 6);
      }
    }
    expect_text_on_page({}, {.q = n, .k = n}, L);
  }
}

TEST(HeatmapLayout, CellSizeFitsTheGridAndThePixelGrid) {
  // Automatic: whole pixels at 2x, a 4 x 4 matrix not tiny, a grid within budget.
  EXPECT_GE(heatmap_cell_size({}, {.q = 4, .k = 4}) * 4, 110);
  for (HeatmapGrid g :
       {HeatmapGrid{.q = 3, .k = 7}, HeatmapGrid{.rows = 2, .cols = 4, .q = 10, .k = 10},
        HeatmapGrid{.q = 100, .k = 100}, HeatmapGrid{.q = 60, .k = 32}}) {
    const HeatmapLayout L = layout({}, g);
    EXPECT_EQ(L.cell * 2, std::floor(L.cell * 2));
    EXPECT_LE(L.grid_w, kMaxGridWidth);
    EXPECT_LE(L.grid_h, kMaxGridHeight);
    EXPECT_DOUBLE_EQ(L.grid_w, static_cast<double>(g.cols) * L.panel_w +
                                   static_cast<double>(g.cols - 1) * kGapX);
  }
  // Token labels get at least 11 pt per cell; a fixed size is used as given.
  EXPECT_GE(
      heatmap_cell_size({.xticklabels = std::vector<std::string>(50, "w")}, {.q = 3, .k = 50}), 11);
  EXPECT_EQ(heatmap_cell_size({.cell_size = 7.25}, {.q = 30, .k = 30}), 7.25);
}

TEST(HeatmapLayout, OriginIsOnWholePoints) {
  const HeatmapLayout L =
      layout({.title = "t", .xticklabels = {"a", "bb", "ccc"}}, {.q = 2, .k = 3});
  EXPECT_EQ(L.origin_x, std::floor(L.origin_x));
  EXPECT_EQ(L.origin_y, std::floor(L.origin_y));
  EXPECT_EQ(L.size.width, std::floor(L.size.width));
  EXPECT_EQ(L.size.height, std::floor(L.size.height));
}
