#include "attn/viz/heatmap.h"

#include <algorithm>
#include <cmath>

#include "canvas.h"
#include "heatmap_layout.h"

namespace attn::viz {

using detail::Canvas;
using detail::HAlign;
using detail::VAlign;
using namespace detail::heatmap_style;

namespace {

constexpr double kFrameWidth = 0.8;
// Above this many cells in all, the cells are drawn as one image per panel
// instead of one rectangle each (about 130 bytes of SVG per rectangle).
constexpr std::int64_t kMaxVectorCells = 65536;
const Color kBlack{0, 0, 0, 1};

std::string panel_name(std::int64_t rows, std::int64_t cols, std::int64_t r, std::int64_t c) {
  if (rows == 1 && cols == 1) return "";
  return fmt::format(" of panel (row {}, col {})", r, c);
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

// ---- painting (where things go is heatmap_layout.h's business) ----

namespace {

// A colour as the 0x00RRGGBB of cairo's RGB24 pixels (also a key to compare
// colours as drawn).
std::uint32_t rgb24(const Color& x) {
  return static_cast<std::uint32_t>(std::lround(x.r * 255) << 16 | std::lround(x.g * 255) << 8 |
                                    std::lround(x.b * 255));
}

// The cells of one panel (q x k values, row-major) with their top-left corner
// at (x0, y0). Above kMaxVectorCells cells in the whole figure, each panel is
// one image instead of one rectangle per cell.
template <class ColorOf>
void paint_cells(Canvas& canvas, const double* values, std::int64_t q, std::int64_t k, double x0,
                 double y0, double cell, bool as_image, const ColorOf& color_of) {
  cairo_t* cr = canvas.cr();
  if (as_image) {
    // One pixel per cell, scaled up without smoothing (crisp in the PNG;
    // in the SVG the viewer may smooth it, which at these sizes is invisible).
    cairo_surface_t* img =
        cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(k), static_cast<int>(q));
    const int stride = cairo_image_surface_get_stride(img);
    unsigned char* data = cairo_image_surface_get_data(img);
    if (data != nullptr) {
      for (std::int64_t i = 0; i < q; ++i) {
        auto* row = reinterpret_cast<std::uint32_t*>(data + i * stride);
        for (std::int64_t j = 0; j < k; ++j) row[j] = rgb24(color_of(values[i * k + j]));
      }
    }
    cairo_surface_mark_dirty(img);
    cairo_save(cr);
    cairo_translate(cr, x0, y0);
    cairo_scale(cr, cell, cell);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_rectangle(cr, 0, 0, static_cast<double>(k), static_cast<double>(q));
    cairo_fill(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
    return;
  }
  // Each cell overlaps its right and lower neighbours slightly (they paint over
  // it), so SVG viewers show no hairline seams between cells.
  const double overlap = std::min(0.5, cell / 2);
  for (std::int64_t i = 0; i < q; ++i) {
    const double h = cell + (i + 1 < q ? overlap : 0);
    // Runs of equal colour (masked or saturated cells) as one rectangle.
    std::int64_t j = 0;
    while (j < k) {
      const Color col = color_of(values[i * k + j]);
      std::int64_t end = j + 1;
      while (end < k && rgb24(color_of(values[i * k + end])) == rgb24(col)) ++end;
      const double w = cell * static_cast<double>(end - j) + (end < k ? overlap : 0);
      canvas.fill_rect(x0 + cell * static_cast<double>(j), y0 + cell * static_cast<double>(i), w, h,
                       col);
      j = end;
    }
  }
}

// Frame and ticks of panel (r, c); tick labels, axis labels and titles on
// the outer panels only.
void paint_panel_axes(Canvas& canvas, const HeatmapOptions& o, const detail::HeatmapLayout& L,
                      std::int64_t rows, std::int64_t r, std::int64_t c) {
  const double x0 = L.panel_x(c), y0 = L.panel_y(r), pw = L.panel_w, ph = L.panel_h;
  const detail::IndexTicks& xt = L.xticks;
  const detail::IndexTicks& yt = L.yticks;
  canvas.stroke_rect(x0, y0, pw, ph, kFrameWidth, kBlack);
  for (std::int64_t i : yt.index) {
    const double y = y0 + L.cell_center(i);
    canvas.line(x0, y, x0 - kTickLength, y, kFrameWidth, kBlack);
  }
  for (std::int64_t j : xt.index) {
    const double x = x0 + L.cell_center(j);
    canvas.line(x, y0 + ph, x, y0 + ph + kTickLength, kFrameWidth, kBlack);
  }
  if (c == 0) {
    for (std::size_t t = 0; t < yt.index.size(); ++t) {
      const double y = y0 + L.cell_center(yt.index[t]);
      canvas.text(yt.label[t], L.ytick_right, y, kTickFont, HAlign::right, VAlign::cap_center);
    }
    canvas.text(o.ylabel, L.ylabel_x, y0 + ph / 2, kLabelFont, HAlign::center, VAlign::bottom, 90);
    if (!o.row_labels.empty())
      canvas.text(o.row_labels[static_cast<std::size_t>(r)], L.row_label_x, y0 + ph / 2, kLabelFont,
                  HAlign::center, VAlign::bottom, 90, kBlack, true);
  }
  if (r == rows - 1) {
    for (std::size_t t = 0; t < xt.index.size(); ++t) {
      const double x = x0 + L.cell_center(xt.index[t]);
      if (xt.rotated)
        canvas.text(xt.label[t], x, L.xtick_top, kTickFont, HAlign::right, VAlign::cap_center, 90);
      else
        canvas.text(xt.label[t], x, L.xtick_top, kTickFont, HAlign::center, VAlign::top);
    }
    canvas.text(o.xlabel, x0 + pw / 2, L.xlabel_top, kLabelFont, HAlign::center, VAlign::top);
  }
  if (r == 0 && !o.titles.empty())
    canvas.text(o.titles[static_cast<std::size_t>(c)], x0 + pw / 2, L.column_title_bottom,
                kTitleFont, HAlign::center, VAlign::bottom);
}

void paint_colorbar(Canvas& canvas, Colormap cmap, const detail::HeatmapLayout& L) {
  cairo_t* cr = canvas.cr();
  const double x = L.colorbar_x, y = L.colorbar_y, w = L.colorbar_w, h = L.colorbar_h;
  // The bar is one gradient through the colormap's anchors: exactly the
  // piecewise-linear map the cells use, and a compact <linearGradient> in SVG.
  cairo_pattern_t* gradient = cairo_pattern_create_linear(0, y + h, 0, y);
  const int stops = 64;
  for (int s = 0; s <= stops; ++s) {
    const double t = static_cast<double>(s) / stops;
    const Color col = colormap_color(cmap, t);
    cairo_pattern_add_color_stop_rgb(gradient, t, col.r, col.g, col.b);
  }
  cairo_rectangle(cr, x, y, w, h);
  cairo_set_source(cr, gradient);
  cairo_fill(cr);
  cairo_pattern_destroy(gradient);
  canvas.stroke_rect(x, y, w, h, kFrameWidth, kBlack);
  for (std::size_t t = 0; t < L.colorbar_ticks.size(); ++t) {
    const double ty = L.colorbar_tick_y[t];
    canvas.line(x + w, ty, x + w + kTickLength, ty, kFrameWidth, kBlack);
    canvas.text(L.colorbar_labels[t], x + w + kTickLength + kTickPad, ty, kTickFont, HAlign::left,
                VAlign::cap_center);
  }
}

}  // namespace

FigureSize Heatmaps::draw(Canvas& canvas) const {
  const HeatmapOptions& o = options_;
  const detail::HeatmapLayout L =
      detail::layout_heatmaps(o, {rows_, cols_, q_, k_}, vmin_, vmax_, canvas);
  cairo_t* cr = canvas.cr();
  cairo_save(cr);
  cairo_translate(cr, L.origin_x, L.origin_y);
  const double range = vmax_ - vmin_;
  auto color_of = [&](double v) { return colormap_color(o.cmap, (v - vmin_) / range); };
  const bool as_image = rows_ * cols_ * q_ * k_ > kMaxVectorCells;
  for (std::int64_t r = 0; r < rows_; ++r)
    for (std::int64_t c = 0; c < cols_; ++c) {
      paint_cells(canvas, &values_[static_cast<std::size_t>((r * cols_ + c) * q_ * k_)], q_, k_,
                  L.panel_x(c), L.panel_y(r), L.cell, as_image, color_of);
      paint_panel_axes(canvas, o, L, rows_, r, c);
    }
  if (!o.title.empty())
    canvas.text(o.title, L.grid_w / 2, L.figure_title_bottom, kFigureTitleFont, HAlign::center,
                VAlign::bottom, 0, kBlack, true);
  if (L.colorbar) paint_colorbar(canvas, o.cmap, L);
  cairo_restore(cr);
  return L.size;
}

}  // namespace attn::viz
