// src/viz/heatmap_layout.h — internal: where everything of a Heatmaps figure
// goes (cell size, panels, ticks, labels, titles, colorbar, page size), as a
// plain function of the options, the grid's shape, the colour range and the
// text metrics. heatmap.cpp paints this layout with cairo.
//
// Coordinates are points, y downwards, relative to the top-left corner of
// panel (0, 0); `origin` is where that corner lands on the page.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attn/viz/figure.h"
#include "attn/viz/heatmap.h"
#include "text_metrics.h"

namespace attn::viz::detail {

// Sizes in points. Fonts follow matplotlib's defaults scaled to our figure
// sizes: ticks a little smaller than labels, titles like labels.
namespace heatmap_style {
constexpr double kTickFont = 9, kLabelFont = 10, kTitleFont = 10, kFigureTitleFont = 11;
constexpr double kTickLength = 3.5, kTickPad = 2.5, kLabelPad = 4, kOuterPad = 8;
constexpr double kGapX = 12, kGapY = 12;  // between panels
constexpr double kColorbarGap = 14, kColorbarWidth = 11;
constexpr double kMaxGridWidth = 540, kMaxGridHeight = 600;  // auto cell size budget
constexpr double kColumnTitleGap = 5;  // between a column title and its panel
constexpr double kFigureTitleGap = 7;  // between the figure title and what is under it
}  // namespace heatmap_style

// The shape of the grid of matrices: rows x cols panels of Q x K cells.
struct HeatmapGrid {
  std::int64_t rows = 1, cols = 1, q = 1, k = 1;
};

// The ticks of one axis of a panel: which indices get a label, the labels,
// and whether they are rotated (x only).
struct IndexTicks {
  std::vector<std::int64_t> index;
  std::vector<std::string> label;
  bool rotated = false;
  double extent = 0;  // size of the label block away from the axis
};

struct HeatmapLayout {
  double cell = 0;  // side of one cell
  double panel_w = 0, panel_h = 0;  // one panel
  double grid_w = 0, grid_h = 0;  // all panels with the gaps between them
  IndexTicks xticks, yticks;

  // Left of column 0: right edge of the y tick labels, right (lower, once
  // rotated) edge of the y label and of the row labels.
  double ytick_right = 0, ylabel_x = 0, row_label_x = 0;
  // Under the bottom row: top of the x tick labels and of the x label.
  double xtick_top = 0, xlabel_top = 0;
  // Bottom of the column titles and of the figure title.
  double column_title_bottom = 0, figure_title_bottom = 0;

  // The colorbar (when shown): its box, and its ticks with their labels and
  // their heights (y of each tick).
  bool colorbar = false;
  double colorbar_x = 0, colorbar_y = 0, colorbar_w = 0, colorbar_h = 0;
  std::vector<double> colorbar_ticks, colorbar_tick_y;
  std::vector<std::string> colorbar_labels;

  // Where panel (0, 0) lands on the page (whole points, so that cells stay on
  // the pixel grid), and the page size.
  double origin_x = 0, origin_y = 0;
  FigureSize size;

  double panel_x(std::int64_t c) const {
    return static_cast<double>(c) * (panel_w + heatmap_style::kGapX);
  }
  double panel_y(std::int64_t r) const {
    return static_cast<double>(r) * (panel_h + heatmap_style::kGapY);
  }
  // Centre of cell row or column i, from the panel's edge.
  double cell_center(std::int64_t i) const { return (static_cast<double>(i) + 0.5) * cell; }
};

// The side of a cell: `options.cell_size`, or one chosen so that a 4 x 4
// matrix is not tiny and the whole grid fits kMaxGridWidth x kMaxGridHeight
// (at least 11 pt to label every token of up to 60), in whole pixels at 2x.
double heatmap_cell_size(const HeatmapOptions& options, const HeatmapGrid& grid);

// Tick labels for n cells of side `cell`: every 1, 2, 5, 10, ... index, so
// that labels do not overlap; x labels (words) rotate when wider than a cell.
IndexTicks heatmap_index_ticks(const TextMetrics& metrics, std::int64_t n, double cell,
                               const std::vector<std::string>& names, bool is_x);

// The whole layout. [vmin, vmax] is the colour scale (vmin < vmax).
HeatmapLayout layout_heatmaps(const HeatmapOptions& options, const HeatmapGrid& grid, double vmin,
                              double vmax, const TextMetrics& metrics);

}  // namespace attn::viz::detail
