#include "heatmap_layout.h"

#include <algorithm>
#include <cmath>

#include "ticks.h"

namespace attn::viz::detail {

using namespace heatmap_style;

namespace {

// Axis-aligned bounds of everything drawn, to size the figure.
struct Bounds {
  double x0 = 1e300, y0 = 1e300, x1 = -1e300, y1 = -1e300;
  void add(double xa, double ya, double xb, double yb) {
    x0 = std::min({x0, xa, xb});
    x1 = std::max({x1, xa, xb});
    y0 = std::min({y0, ya, yb});
    y1 = std::max({y1, ya, yb});
  }
};

}  // namespace

double heatmap_cell_size(const HeatmapOptions& o, const HeatmapGrid& g) {
  if (o.cell_size != 0) return o.cell_size;
  const double n = static_cast<double>(std::max(g.q, g.k));
  const double long_side = std::clamp(14.0 * n, 110.0, 320.0);
  double cell = long_side / n;
  const double grid_w =
      (kMaxGridWidth - kGapX * static_cast<double>(g.cols - 1)) / static_cast<double>(g.cols);
  const double grid_h =
      (kMaxGridHeight - kGapY * static_cast<double>(g.rows - 1)) / static_cast<double>(g.rows);
  cell = std::min({cell, grid_w / static_cast<double>(g.k), grid_h / static_cast<double>(g.q)});
  const bool words = !o.xticklabels.empty() || !o.yticklabels.empty();
  if (words && n <= 60) cell = std::max(cell, 11.0);  // room to label every token
  cell = std::clamp(cell, 1.0, 36.0);
  return std::floor(cell * 2) / 2;  // whole pixels at 2x: crisp edges in the PNG
}

IndexTicks heatmap_index_ticks(const TextMetrics& m, std::int64_t n, double cell,
                               const std::vector<std::string>& names, bool is_x) {
  IndexTicks t;
  auto label_of = [&](std::int64_t i) {
    return names.empty() ? std::to_string(i) : names[static_cast<std::size_t>(i)];
  };
  double max_width = 0;
  for (std::int64_t i = 0; i < n; ++i)
    max_width = std::max(max_width, m.text_width(label_of(i), kTickFont));
  const double line = m.line_height(kTickFont);
  double min_gap;
  if (names.empty()) {
    // Integer indices: label every 1, 2, 5, 10... cells, at least 16 pt apart.
    min_gap = is_x ? std::max(16.0, max_width + 6) : 16.0;
  } else if (!is_x) {
    min_gap = line + 1.5;
  } else {
    // Words: upright if each fits above its own cell, otherwise rotated.
    t.rotated = max_width + 4 > cell;
    min_gap = t.rotated ? line + 1.5 : max_width + 4;
  }
  const int step = index_tick_step(cell, min_gap);
  for (std::int64_t i = 0; i < n; i += step) {
    t.index.push_back(i);
    t.label.push_back(label_of(i));
  }
  double widest = 0;
  for (const auto& s : t.label) widest = std::max(widest, m.text_width(s, kTickFont));
  t.extent = (is_x && !t.rotated) ? m.line_height(kTickFont) : widest;
  return t;
}

HeatmapLayout layout_heatmaps(const HeatmapOptions& o, const HeatmapGrid& g, double vmin,
                              double vmax, const TextMetrics& m) {
  HeatmapLayout L;
  L.cell = heatmap_cell_size(o, g);
  L.panel_w = L.cell * static_cast<double>(g.k);
  L.panel_h = L.cell * static_cast<double>(g.q);
  L.grid_w = L.panel_x(g.cols - 1) + L.panel_w;
  L.grid_h = L.panel_y(g.rows - 1) + L.panel_h;
  const double pw = L.panel_w, ph = L.panel_h, grid_w = L.grid_w, grid_h = L.grid_h;

  Bounds b;
  b.add(0, 0, grid_w, grid_h);
  const double label_line = m.line_height(kLabelFont);
  L.xticks = heatmap_index_ticks(m, g.k, L.cell, o.xticklabels, true);
  L.yticks = heatmap_index_ticks(m, g.q, L.cell, o.yticklabels, false);
  const IndexTicks& xt = L.xticks;
  const IndexTicks& yt = L.yticks;

  // y tick labels and y label left of column 0; row labels further left.
  L.ytick_right = -kTickLength - kTickPad;
  L.ylabel_x = L.ytick_right - yt.extent - kLabelPad;
  L.row_label_x = L.ylabel_x - (o.ylabel.empty() ? 0 : label_line + 6);
  b.add(L.ytick_right - yt.extent, 0, 0, 0);
  for (std::int64_t r = 0; r < g.rows; ++r) {
    const double cy = L.panel_y(r) + ph / 2;
    if (!o.ylabel.empty()) {
      const double w = m.text_width(o.ylabel, kLabelFont);
      b.add(L.ylabel_x - label_line, cy - w / 2, L.ylabel_x, cy + w / 2);
    }
    if (!o.row_labels.empty()) {
      const double w = m.text_width(o.row_labels[static_cast<std::size_t>(r)], kLabelFont, true);
      b.add(L.row_label_x - label_line, cy - w / 2, L.row_label_x, cy + w / 2);
    }
  }
  // x tick labels and x label under the bottom row.
  L.xtick_top = grid_h + kTickLength + kTickPad;
  L.xlabel_top = L.xtick_top + xt.extent + kLabelPad;
  b.add(0, grid_h, grid_w, L.xtick_top + xt.extent);
  for (std::int64_t c = 0; c < g.cols; ++c) {
    const double cx = L.panel_x(c) + pw / 2;
    if (!xt.rotated && !xt.index.empty()) {  // labels centred on ticks may stick out sideways
      const double first = m.text_width(xt.label.front(), kTickFont);
      const double last = m.text_width(xt.label.back(), kTickFont);
      b.add(L.panel_x(c) + L.cell_center(xt.index.front()) - first / 2, L.xtick_top,
            L.panel_x(c) + L.cell_center(xt.index.back()) + last / 2, L.xtick_top);
    }
    if (!o.xlabel.empty()) {
      const double w = m.text_width(o.xlabel, kLabelFont);
      b.add(cx - w / 2, L.xlabel_top, cx + w / 2, L.xlabel_top + label_line);
    }
  }
  // Column titles above the top row, then the figure title.
  L.column_title_bottom = -kColumnTitleGap;
  double top = 0;
  if (!o.titles.empty()) {
    top = L.column_title_bottom - label_line;
    for (std::int64_t c = 0; c < g.cols; ++c) {
      const double w = m.text_width(o.titles[static_cast<std::size_t>(c)], kTitleFont);
      const double cx = L.panel_x(c) + pw / 2;
      b.add(cx - w / 2, top, cx + w / 2, 0);
    }
  }
  L.figure_title_bottom = top - kFigureTitleGap;
  if (!o.title.empty()) {
    const double w = m.text_width(o.title, kFigureTitleFont, true);
    b.add(grid_w / 2 - w / 2, L.figure_title_bottom - m.line_height(kFigureTitleFont),
          grid_w / 2 + w / 2, L.figure_title_bottom);
  }
  // The colorbar, centred on the grid: full height for small grids, then 60-100%.
  L.colorbar = o.colorbar;
  L.colorbar_x = grid_w + kColorbarGap;
  L.colorbar_w = kColorbarWidth;
  L.colorbar_h = grid_h <= 200 ? grid_h : std::max(200.0, 0.7 * grid_h);
  L.colorbar_y = (grid_h - L.colorbar_h) / 2;
  if (o.colorbar) {
    const double cb_x = L.colorbar_x, cb_y = L.colorbar_y, cb_h = L.colorbar_h;
    const int max_ticks = std::clamp(static_cast<int>(cb_h / 22), 2, 8);
    L.colorbar_ticks = nice_ticks(vmin, vmax, max_ticks);
    L.colorbar_labels = format_ticks(L.colorbar_ticks);
    const double range = vmax - vmin;
    for (double t : L.colorbar_ticks)
      L.colorbar_tick_y.push_back(cb_y + cb_h - (t - vmin) / range * cb_h);
    double label_w = 0;
    for (const auto& s : L.colorbar_labels) label_w = std::max(label_w, m.text_width(s, kTickFont));
    const double cap = m.cap_height(kTickFont);
    b.add(cb_x, cb_y - cap, cb_x + kColorbarWidth + kTickLength + kTickPad + label_w,
          cb_y + cb_h + cap);
  }

  L.origin_x = std::ceil(kOuterPad - b.x0);
  L.origin_y = std::ceil(kOuterPad - b.y0);
  L.size = {std::ceil(L.origin_x + b.x1 + kOuterPad), std::ceil(L.origin_y + b.y1 + kOuterPad)};
  return L;
}

}  // namespace attn::viz::detail
