#include "attn/viz/heatmap.h"

#include <algorithm>
#include <cmath>

#include "canvas.h"

namespace attn::viz {

using detail::Canvas;
using detail::HAlign;
using detail::VAlign;

namespace {

// Sizes in points. Fonts follow matplotlib's defaults scaled to our figure
// sizes: ticks a little smaller than labels, titles like labels.
constexpr double kTickFont = 9, kLabelFont = 10, kTitleFont = 10, kFigureTitleFont = 11;
constexpr double kTickLength = 3.5, kTickPad = 2.5, kLabelPad = 4, kOuterPad = 8;
constexpr double kFrameWidth = 0.8;
constexpr double kGapX = 12, kGapY = 12;  // between panels
constexpr double kColorbarGap = 14, kColorbarWidth = 11;
constexpr double kMaxGridWidth = 540, kMaxGridHeight = 600;  // auto cell size budget
// Above this many cells in all, the cells are drawn as one image per panel
// instead of one rectangle each (about 130 bytes of SVG per rectangle).
constexpr std::int64_t kMaxVectorCells = 65536;
const Color kBlack{0, 0, 0, 1};

std::string panel_name(std::int64_t rows, std::int64_t cols, std::int64_t r, std::int64_t c) {
  if (rows == 1 && cols == 1) return "";
  return fmt::format(" of panel (row {}, col {})", r, c);
}

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

// One axis of a panel: which indices get a label, the labels, and whether
// they are rotated (x only).
struct AxisTicks {
  std::vector<std::int64_t> index;
  std::vector<std::string> label;
  bool rotated = false;
  double extent = 0;  // size of the label block away from the axis
};

AxisTicks make_ticks(Canvas& canvas, std::int64_t n, double cell,
                     const std::vector<std::string>& names, bool is_x) {
  AxisTicks t;
  auto label_of = [&](std::int64_t i) {
    return names.empty() ? std::to_string(i) : names[static_cast<std::size_t>(i)];
  };
  double max_width = 0;
  for (std::int64_t i = 0; i < n; ++i)
    max_width = std::max(max_width, canvas.text_width(label_of(i), kTickFont));
  const double line = canvas.line_height(kTickFont);
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
  const int step = detail::index_tick_step(cell, min_gap);
  for (std::int64_t i = 0; i < n; i += step) {
    t.index.push_back(i);
    t.label.push_back(label_of(i));
  }
  double widest = 0;
  for (const auto& s : t.label) widest = std::max(widest, canvas.text_width(s, kTickFont));
  t.extent = (is_x && !t.rotated) ? canvas.line_height(kTickFont) : widest;
  return t;
}

}  // namespace

Heatmaps::Heatmaps(const Tensor& matrices, HeatmapOptions options) : options_(std::move(options)) {
  ATTN_CHECK(matrices.defined(), ValueError, "Heatmaps: the matrices tensor is undefined");
  const Shape& s = matrices.shape();
  ATTN_CHECK(s.size() >= 2 && s.size() <= 4, ShapeError,
             "Heatmaps: expected a (rows, cols, Q, K), (cols, Q, K) or (Q, K) tensor, got shape {}",
             shape_str(s));
  Shape full(4 - s.size(), 1);
  full.insert(full.end(), s.begin(), s.end());
  rows_ = full[0];
  cols_ = full[1];
  q_ = full[2];
  k_ = full[3];
  ATTN_CHECK(matrices.numel() > 0, ValueError,
             "Heatmaps: nothing to draw: the matrices have shape {}", shape_str(s));
  values_ = to_vector<double>(matrices);
  init();
}

Heatmaps::Heatmaps(const std::vector<std::vector<Tensor>>& matrices, HeatmapOptions options)
    : options_(std::move(options)) {
  ATTN_CHECK(!matrices.empty() && !matrices[0].empty(), ValueError,
             "Heatmaps: nothing to draw: got {} rows of matrices{}", matrices.size(),
             matrices.empty() ? "" : " and the first row is empty");
  rows_ = static_cast<std::int64_t>(matrices.size());
  cols_ = static_cast<std::int64_t>(matrices[0].size());
  for (std::int64_t r = 0; r < rows_; ++r) {
    const auto& row = matrices[static_cast<std::size_t>(r)];
    ATTN_CHECK(static_cast<std::int64_t>(row.size()) == cols_, ShapeError,
               "Heatmaps: every row needs the same number of matrices: row 0 has {}, row {} has {}",
               cols_, r, row.size());
    for (std::int64_t c = 0; c < cols_; ++c) {
      const Tensor& m = row[static_cast<std::size_t>(c)];
      ATTN_CHECK(m.defined(), ValueError, "Heatmaps: matrix (row {}, col {}) is undefined", r, c);
      ATTN_CHECK(m.dim() == 2, ShapeError,
                 "Heatmaps: matrix (row {}, col {}) must be 2-D (Q, K), got shape {}", r, c,
                 shape_str(m.shape()));
      if (r == 0 && c == 0) {
        q_ = m.size(0);
        k_ = m.size(1);
        ATTN_CHECK(q_ > 0 && k_ > 0, ValueError,
                   "Heatmaps: nothing to draw: matrix (row 0, col 0) has shape {}",
                   shape_str(m.shape()));
        values_.reserve(static_cast<std::size_t>(rows_ * cols_ * q_ * k_));
      }
      ATTN_CHECK(m.size(0) == q_ && m.size(1) == k_, ShapeError,
                 "Heatmaps: all matrices must have one shape: (row 0, col 0) is [{}, {}], (row {}, "
                 "col {}) is {}",
                 q_, k_, r, c, shape_str(m.shape()));
      std::vector<double> v = to_vector<double>(m);
      values_.insert(values_.end(), v.begin(), v.end());
    }
  }
  init();
}

void Heatmaps::init() {
  const HeatmapOptions& o = options_;
  ATTN_CHECK(q_ <= 8192 && k_ <= 8192, ValueError,
             "Heatmaps: matrices up to 8192 x 8192 can be drawn, got {} x {}", q_, k_);
  ATTN_CHECK(o.titles.empty() || static_cast<std::int64_t>(o.titles.size()) == cols_, ValueError,
             "Heatmaps: expected {} titles (one per column) or none, got {}", cols_,
             o.titles.size());
  ATTN_CHECK(o.row_labels.empty() || static_cast<std::int64_t>(o.row_labels.size()) == rows_,
             ValueError, "Heatmaps: expected {} row labels (one per row) or none, got {}", rows_,
             o.row_labels.size());
  ATTN_CHECK(o.xticklabels.empty() || static_cast<std::int64_t>(o.xticklabels.size()) == k_,
             ValueError, "Heatmaps: expected {} x tick labels (one per key) or none, got {}", k_,
             o.xticklabels.size());
  ATTN_CHECK(o.yticklabels.empty() || static_cast<std::int64_t>(o.yticklabels.size()) == q_,
             ValueError, "Heatmaps: expected {} y tick labels (one per query) or none, got {}", q_,
             o.yticklabels.size());
  ATTN_CHECK(
      o.cell_size == 0 || (std::isfinite(o.cell_size) && o.cell_size > 0 && o.cell_size <= 200),
      ValueError, "Heatmaps: cell_size must be 0 (automatic) or in (0, 200] points, got {}",
      o.cell_size);
  if (o.vmin)
    ATTN_CHECK(std::isfinite(*o.vmin), ValueError, "Heatmaps: vmin must be finite, got {}",
               *o.vmin);
  if (o.vmax)
    ATTN_CHECK(std::isfinite(*o.vmax), ValueError, "Heatmaps: vmax must be finite, got {}",
               *o.vmax);
  if (o.vmin && o.vmax)
    ATTN_CHECK(*o.vmin <= *o.vmax, ValueError, "Heatmaps: vmin {} is greater than vmax {}", *o.vmin,
               *o.vmax);

  double lo = INFINITY, hi = -INFINITY;
  for (std::int64_t r = 0; r < rows_; ++r)
    for (std::int64_t c = 0; c < cols_; ++c)
      for (std::int64_t i = 0; i < q_; ++i)
        for (std::int64_t j = 0; j < k_; ++j) {
          const double v = value(r, c, i, j);
          if (!std::isfinite(v)) [[unlikely]] {
            throw ValueError(fmt::format(
                "Heatmaps: the value at [{}, {}]{} is {}; values must be finite", i, j,
                panel_name(rows_, cols_, r, c), std::isnan(v) ? "NaN" : (v > 0 ? "inf" : "-inf")));
          }
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
  vmin_ = o.vmin.value_or(lo);
  vmax_ = o.vmax.value_or(hi);
  if (vmin_ > vmax_) {  // only one limit fixed, beyond the data
    if (o.vmin)
      vmax_ = vmin_;
    else
      vmin_ = vmax_;
  }
  if (vmax_ == vmin_) {
    // A flat matrix (all zeros, say): give the bar a range to show.
    const double half = vmin_ == 0 ? 0.5 : std::fabs(vmin_) * 0.5;
    vmin_ -= half;
    vmax_ += half;
    if (vmin_ < 0 && lo >= 0 && !o.vmin) {  // keep non-negative data at a zero floor
      vmax_ -= vmin_;
      vmin_ = 0;
    }
  }
}

FigureSize Heatmaps::draw(Canvas& canvas) const {
  const HeatmapOptions& o = options_;
  cairo_t* cr = canvas.cr();

  // ---- cell size ----
  double cell = o.cell_size;
  if (cell == 0) {
    const double n = static_cast<double>(std::max(q_, k_));
    const double long_side = std::clamp(14.0 * n, 110.0, 320.0);
    cell = long_side / n;
    const double grid_w =
        (kMaxGridWidth - kGapX * static_cast<double>(cols_ - 1)) / static_cast<double>(cols_);
    const double grid_h =
        (kMaxGridHeight - kGapY * static_cast<double>(rows_ - 1)) / static_cast<double>(rows_);
    cell = std::min({cell, grid_w / static_cast<double>(k_), grid_h / static_cast<double>(q_)});
    const bool words = !o.xticklabels.empty() || !o.yticklabels.empty();
    if (words && n <= 60) cell = std::max(cell, 11.0);  // room to label every token
    cell = std::clamp(cell, 1.0, 36.0);
    cell = std::floor(cell * 2) / 2;  // whole pixels at 2x: crisp edges in the PNG
  }
  const double pw = cell * static_cast<double>(k_), ph = cell * static_cast<double>(q_);
  auto panel_x = [&](std::int64_t c) { return static_cast<double>(c) * (pw + kGapX); };
  auto panel_y = [&](std::int64_t r) { return static_cast<double>(r) * (ph + kGapY); };
  const double grid_w = panel_x(cols_ - 1) + pw, grid_h = panel_y(rows_ - 1) + ph;

  // ---- layout: positions relative to the top-left corner of panel (0, 0) ----
  Bounds b;
  b.add(0, 0, grid_w, grid_h);
  const double label_line = canvas.line_height(kLabelFont);
  const AxisTicks xt = make_ticks(canvas, k_, cell, o.xticklabels, true);
  const AxisTicks yt = make_ticks(canvas, q_, cell, o.yticklabels, false);

  // y tick labels and y label left of column 0; row labels further left.
  const double ytick_right = -kTickLength - kTickPad;
  const double ylabel_x = ytick_right - yt.extent - kLabelPad;  // right edge of the rotated y label
  const double row_label_x = ylabel_x - (o.ylabel.empty() ? 0 : label_line + 6);
  b.add(ytick_right - yt.extent, 0, 0, 0);
  for (std::int64_t r = 0; r < rows_; ++r) {
    const double cy = panel_y(r) + ph / 2;
    if (!o.ylabel.empty()) {
      const double w = canvas.text_width(o.ylabel, kLabelFont);
      b.add(ylabel_x - label_line, cy - w / 2, ylabel_x, cy + w / 2);
    }
    if (!o.row_labels.empty()) {
      const double w =
          canvas.text_width(o.row_labels[static_cast<std::size_t>(r)], kLabelFont, true);
      b.add(row_label_x - label_line, cy - w / 2, row_label_x, cy + w / 2);
    }
  }
  // x tick labels and x label under the bottom row.
  const double xtick_top = grid_h + kTickLength + kTickPad;
  const double xlabel_top = xtick_top + xt.extent + kLabelPad;
  b.add(0, grid_h, grid_w, xtick_top + xt.extent);
  for (std::int64_t c = 0; c < cols_; ++c) {
    const double cx = panel_x(c) + pw / 2;
    if (!xt.rotated && !xt.index.empty()) {  // labels centred on ticks may stick out sideways
      const double first = canvas.text_width(xt.label.front(), kTickFont);
      const double last = canvas.text_width(xt.label.back(), kTickFont);
      b.add(panel_x(c) + (static_cast<double>(xt.index.front()) + 0.5) * cell - first / 2,
            xtick_top, panel_x(c) + (static_cast<double>(xt.index.back()) + 0.5) * cell + last / 2,
            xtick_top);
    }
    if (!o.xlabel.empty()) {
      const double w = canvas.text_width(o.xlabel, kLabelFont);
      b.add(cx - w / 2, xlabel_top, cx + w / 2, xlabel_top + label_line);
    }
  }
  // Column titles above the top row, then the figure title.
  double top = 0;
  if (!o.titles.empty()) {
    top = -5 - label_line;
    for (std::int64_t c = 0; c < cols_; ++c) {
      const double w = canvas.text_width(o.titles[static_cast<std::size_t>(c)], kTitleFont);
      const double cx = panel_x(c) + pw / 2;
      b.add(cx - w / 2, top, cx + w / 2, 0);
    }
  }
  const double figure_title_bottom = top - 7;
  if (!o.title.empty()) {
    const double w = canvas.text_width(o.title, kFigureTitleFont, true);
    b.add(grid_w / 2 - w / 2, figure_title_bottom - canvas.line_height(kFigureTitleFont),
          grid_w / 2 + w / 2, figure_title_bottom);
  }
  // The colorbar, centred on the grid: full height for small grids, then 60-100%.
  const double cb_x = grid_w + kColorbarGap;
  const double cb_h = grid_h <= 200 ? grid_h : std::max(200.0, 0.7 * grid_h);
  const double cb_y = (grid_h - cb_h) / 2;
  std::vector<double> cb_ticks;
  std::vector<std::string> cb_labels;
  double cb_label_w = 0;
  if (o.colorbar) {
    const int max_ticks = std::clamp(static_cast<int>(cb_h / 22), 2, 8);
    cb_ticks = detail::nice_ticks(vmin_, vmax_, max_ticks);
    cb_labels = detail::format_ticks(cb_ticks);
    for (const auto& s : cb_labels)
      cb_label_w = std::max(cb_label_w, canvas.text_width(s, kTickFont));
    const double cap = canvas.cap_height(kTickFont);
    b.add(cb_x, cb_y - cap, cb_x + kColorbarWidth + kTickLength + kTickPad + cb_label_w,
          cb_y + cb_h + cap);
  }

  // Whole points for the origin, so that cells stay on the pixel grid.
  const double ox = std::ceil(kOuterPad - b.x0), oy = std::ceil(kOuterPad - b.y0);
  const FigureSize size{std::ceil(ox + b.x1 + kOuterPad), std::ceil(oy + b.y1 + kOuterPad)};

  // ---- drawing ----
  cairo_save(cr);
  cairo_translate(cr, ox, oy);
  const double range = vmax_ - vmin_;
  auto color_of = [&](double v) { return colormap_color(o.cmap, (v - vmin_) / range); };
  auto key = [](const Color& x) {
    return static_cast<std::uint32_t>(std::lround(x.r * 255) << 16 | std::lround(x.g * 255) << 8 |
                                      std::lround(x.b * 255));
  };
  // Each cell overlaps its right and lower neighbours slightly (they paint over
  // it), so SVG viewers show no hairline seams between cells.
  const double overlap = std::min(0.5, cell / 2);
  const bool as_image = rows_ * cols_ * q_ * k_ > kMaxVectorCells;
  for (std::int64_t r = 0; r < rows_; ++r)
    for (std::int64_t c = 0; c < cols_; ++c) {
      const double x0 = panel_x(c), y0 = panel_y(r);
      if (as_image) {
        // One pixel per cell, scaled up without smoothing (crisp in the PNG;
        // in the SVG the viewer may smooth it, which at these sizes is invisible).
        cairo_surface_t* img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(k_),
                                                          static_cast<int>(q_));
        const int stride = cairo_image_surface_get_stride(img);
        unsigned char* data = cairo_image_surface_get_data(img);
        if (data != nullptr) {
          for (std::int64_t i = 0; i < q_; ++i) {
            auto* row = reinterpret_cast<std::uint32_t*>(data + i * stride);
            for (std::int64_t j = 0; j < k_; ++j) row[j] = key(color_of(value(r, c, i, j)));
          }
        }
        cairo_surface_mark_dirty(img);
        cairo_save(cr);
        cairo_translate(cr, x0, y0);
        cairo_scale(cr, cell, cell);
        cairo_set_source_surface(cr, img, 0, 0);
        cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
        cairo_rectangle(cr, 0, 0, static_cast<double>(k_), static_cast<double>(q_));
        cairo_fill(cr);
        cairo_restore(cr);
        cairo_surface_destroy(img);
      } else {
        for (std::int64_t i = 0; i < q_; ++i) {
          const double h = cell + (i + 1 < q_ ? overlap : 0);
          // Runs of equal colour (masked or saturated cells) as one rectangle.
          std::int64_t j = 0;
          while (j < k_) {
            const Color col = color_of(value(r, c, i, j));
            std::int64_t end = j + 1;
            while (end < k_ && key(color_of(value(r, c, i, end))) == key(col)) ++end;
            const double w = cell * static_cast<double>(end - j) + (end < k_ ? overlap : 0);
            canvas.fill_rect(x0 + cell * static_cast<double>(j), y0 + cell * static_cast<double>(i),
                             w, h, col);
            j = end;
          }
        }
      }
      canvas.stroke_rect(x0, y0, pw, ph, kFrameWidth, kBlack);
      // Ticks on every panel; labels only on the outer ones.
      for (std::int64_t i : yt.index) {
        const double y = y0 + (static_cast<double>(i) + 0.5) * cell;
        canvas.line(x0, y, x0 - kTickLength, y, kFrameWidth, kBlack);
      }
      for (std::int64_t j : xt.index) {
        const double x = x0 + (static_cast<double>(j) + 0.5) * cell;
        canvas.line(x, y0 + ph, x, y0 + ph + kTickLength, kFrameWidth, kBlack);
      }
      if (c == 0) {
        for (std::size_t t = 0; t < yt.index.size(); ++t) {
          const double y = y0 + (static_cast<double>(yt.index[t]) + 0.5) * cell;
          canvas.text(yt.label[t], ytick_right, y, kTickFont, HAlign::right, VAlign::cap_center);
        }
        canvas.text(o.ylabel, ylabel_x, y0 + ph / 2, kLabelFont, HAlign::center, VAlign::bottom,
                    90);
        if (!o.row_labels.empty())
          canvas.text(o.row_labels[static_cast<std::size_t>(r)], row_label_x, y0 + ph / 2,
                      kLabelFont, HAlign::center, VAlign::bottom, 90, kBlack, true);
      }
      if (r == rows_ - 1) {
        for (std::size_t t = 0; t < xt.index.size(); ++t) {
          const double x = x0 + (static_cast<double>(xt.index[t]) + 0.5) * cell;
          if (xt.rotated)
            canvas.text(xt.label[t], x, xtick_top, kTickFont, HAlign::right, VAlign::cap_center,
                        90);
          else
            canvas.text(xt.label[t], x, xtick_top, kTickFont, HAlign::center, VAlign::top);
        }
        canvas.text(o.xlabel, x0 + pw / 2, xlabel_top, kLabelFont, HAlign::center, VAlign::top);
      }
      if (r == 0 && !o.titles.empty())
        canvas.text(o.titles[static_cast<std::size_t>(c)], x0 + pw / 2, -5, kTitleFont,
                    HAlign::center, VAlign::bottom);
    }
  if (!o.title.empty())
    canvas.text(o.title, grid_w / 2, figure_title_bottom, kFigureTitleFont, HAlign::center,
                VAlign::bottom, 0, kBlack, true);

  if (o.colorbar) {
    // The bar is one gradient through the colormap's anchors: exactly the
    // piecewise-linear map the cells use, and a compact <linearGradient> in SVG.
    cairo_pattern_t* gradient = cairo_pattern_create_linear(0, cb_y + cb_h, 0, cb_y);
    const int stops = 64;
    for (int s = 0; s <= stops; ++s) {
      const double t = static_cast<double>(s) / stops;
      const Color col = colormap_color(o.cmap, t);
      cairo_pattern_add_color_stop_rgb(gradient, t, col.r, col.g, col.b);
    }
    cairo_rectangle(cr, cb_x, cb_y, kColorbarWidth, cb_h);
    cairo_set_source(cr, gradient);
    cairo_fill(cr);
    cairo_pattern_destroy(gradient);
    canvas.stroke_rect(cb_x, cb_y, kColorbarWidth, cb_h, kFrameWidth, kBlack);
    for (std::size_t t = 0; t < cb_ticks.size(); ++t) {
      const double y = cb_y + cb_h - (cb_ticks[t] - vmin_) / range * cb_h;
      const double x = cb_x + kColorbarWidth;
      canvas.line(x, y, x + kTickLength, y, kFrameWidth, kBlack);
      canvas.text(cb_labels[t], x + kTickLength + kTickPad, y, kTickFont, HAlign::left,
                  VAlign::cap_center);
    }
  }
  cairo_restore(cr);
  return size;
}

}  // namespace attn::viz
