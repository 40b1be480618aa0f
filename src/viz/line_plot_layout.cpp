#include "line_plot_layout.h"

#include <algorithm>
#include <cmath>

#include "attn/core/error.h"
#include "ticks.h"

namespace attn::viz::detail {

using namespace line_plot_style;

void PlotAxis::make_ticks(int max_ticks) {
  if (log) {
    ticks = log_ticks(lo, hi, max_ticks);
    labels = format_log_ticks(ticks);
  } else {
    ticks = nice_ticks(lo, hi, max_ticks);
    labels = format_ticks(ticks);
  }
}

PlotAxis make_plot_axis(double data_lo, double data_hi, std::optional<double> fixed_lo,
                        std::optional<double> fixed_hi, bool log) {
  PlotAxis a;
  a.log = log;
  auto t = [&](double v) { return log ? std::log10(v) : v; };
  auto inv = [&](double v) { return log ? std::pow(10.0, v) : v; };
  double lo = t(fixed_lo.value_or(data_lo)), hi = t(fixed_hi.value_or(data_hi));
  if (lo > hi && !(fixed_lo && fixed_hi)) {  // one fixed end beyond all data
    if (fixed_lo)
      hi = lo + 1;
    else
      lo = hi - 1;
  }
  if (hi == lo) {
    const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    if (!fixed_lo) lo -= d;
    if (!fixed_hi) hi += d;
    if (hi == lo) hi = lo + 1;
  }
  const double span = hi - lo;
  if (!fixed_lo) lo -= kMargin * span;
  if (!fixed_hi) hi += kMargin * span;
  a.lo = inv(lo);
  a.hi = inv(hi);
  return a;
}

std::vector<double> log_minor_ticks(const PlotAxis& a) {
  std::vector<double> out;
  if (!a.log) return out;
  const int e0 = static_cast<int>(std::floor(std::log10(a.lo))),
            e1 = static_cast<int>(std::ceil(std::log10(a.hi)));
  if (e1 - e0 > 8) return out;
  for (int e = e0; e <= e1; ++e)
    for (int m = 2; m <= 9; ++m) {
      const double v = m * std::pow(10.0, e);
      if (v > a.lo && v < a.hi) out.push_back(v);
    }
  return out;
}

Box legend_box_at(LegendLocation loc, const Box& axes, double bw, double bh) {
  const double l = axes.x + kLegendInset, r = axes.x + axes.w - kLegendInset - bw,
               cx = axes.x + (axes.w - bw) / 2;
  const double t = axes.y + kLegendInset, b = axes.y + axes.h - kLegendInset - bh,
               cy = axes.y + (axes.h - bh) / 2;
  switch (loc) {
    case LegendLocation::upper_left: return Box{l, t, bw, bh};
    case LegendLocation::lower_left: return Box{l, b, bw, bh};
    case LegendLocation::lower_right: return Box{r, b, bw, bh};
    case LegendLocation::center_right: return Box{r, cy, bw, bh};
    case LegendLocation::center_left: return Box{l, cy, bw, bh};
    case LegendLocation::lower_center: return Box{cx, b, bw, bh};
    case LegendLocation::upper_center: return Box{cx, t, bw, bh};
    case LegendLocation::center: return Box{cx, cy, bw, bh};
    default: return Box{r, t, bw, bh};
  }
}

double legend_coverage(const Box& box, const std::vector<Series>& series, const PlotAxis& ax,
                       const PlotAxis& ay) {
  double covered = 0;
  for (const Series& s : series) {
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      const double px = ax.map(s.x[i]), py = ay.map(s.y[i]);
      if (s.marker != Marker::none && box.contains(px, py)) covered += 1;
      if (s.line == LineStyle::none || i == 0) continue;
      const double qx = ax.map(s.x[i - 1]), qy = ay.map(s.y[i - 1]);
      const int steps = std::clamp(static_cast<int>(std::hypot(px - qx, py - qy) / 2), 1, 1000);
      for (int k = 1; k <= steps; ++k) {
        const double f = static_cast<double>(k) / steps;
        if (box.contains(qx + (px - qx) * f, qy + (py - qy) * f)) covered += 1;
      }
    }
  }
  return covered;
}

namespace {

LegendLayout layout_legend(const LinePlotOptions& o, const std::vector<Series>& series,
                           const Box& axes, const PlotAxis& ax, const PlotAxis& ay,
                           const TextMetrics& m) {
  LegendLayout legend;
  for (std::size_t i = 0; i < series.size(); ++i)
    if (!series[i].label.empty()) legend.entries.push_back(i);
  legend.shown = o.legend != LegendLocation::none && !legend.entries.empty();
  if (!legend.shown) return legend;
  legend.row = m.line_height(kLegendFont) + kLegendRowGap;
  double label_w = 0;
  for (std::size_t i : legend.entries)
    label_w = std::max(label_w, m.text_width(series[i].label, kLegendFont));
  const double bw = kLegendPad + kLegendHandle + kLegendGap + label_w + kLegendPad;
  const double bh = kLegendPad + legend.row * static_cast<double>(legend.entries.size()) -
                    kLegendRowGap + kLegendPad;
  legend.box = legend_box_at(o.legend, axes, bw, bh);
  if (o.legend == LegendLocation::best) {
    // matplotlib's "best": the first candidate, in matplotlib's order, that
    // covers the least data.
    static constexpr LegendLocation kOrder[] = {
        LegendLocation::upper_right,  LegendLocation::upper_left,   LegendLocation::lower_left,
        LegendLocation::lower_right,  LegendLocation::center_right, LegendLocation::center_left,
        LegendLocation::lower_center, LegendLocation::upper_center, LegendLocation::center};
    double best = INFINITY;
    for (LegendLocation loc : kOrder) {
      const Box cand = legend_box_at(loc, axes, bw, bh);
      const double covered = legend_coverage(cand, series, ax, ay);
      if (covered < best) best = covered, legend.box = cand;
    }
  }
  return legend;
}

}  // namespace

LinePlotLayout layout_line_plot(const LinePlotOptions& o, const std::vector<Series>& series,
                                const TextMetrics& m) {
  const double W = o.width, H = o.height;
  LinePlotLayout L;

  // ---- axis ranges ----
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const Series& s : series) {
    for (double v : s.x) xlo = std::min(xlo, v), xhi = std::max(xhi, v);
    for (double v : s.y) ylo = std::min(ylo, v), yhi = std::max(yhi, v);
  }
  PlotAxis& ax = L.x;
  PlotAxis& ay = L.y;
  ax = make_plot_axis(xlo, xhi, o.xmin, o.xmax, o.log_x);
  ay = make_plot_axis(ylo, yhi, o.ymin, o.ymax, o.log_y);

  // ---- vertical first (it fixes the y ticks), then horizontal ----
  L.tick_line = m.line_height(kTickFont);
  const double label_line = m.line_height(kLabelFont);
  const double top = kOuterPad + (o.title.empty() ? m.cap_height(kTickFont) / 2
                                                  : m.line_height(kTitleFont) + kTitleGap);
  const double bottom = kOuterPad + kTickLength + kTickPad + L.tick_line +
                        (o.xlabel.empty() ? 0 : kLabelPad + label_line);
  ay.p0 = H - bottom;
  ay.p1 = top;
  ay.make_ticks(std::clamp(static_cast<int>((ay.p0 - ay.p1) / 26), 3, 9));
  for (const auto& s : ay.labels)
    L.ytick_width = std::max(L.ytick_width, m.text_width(s, kTickFont));
  const double left = kOuterPad + (o.ylabel.empty() ? 0 : label_line + kLabelPad) + L.ytick_width +
                      kTickPad + kTickLength;
  double right = kOuterPad + 4;
  ax.p0 = left;
  for (int pass = 0; pass < 2; ++pass) {
    ax.p1 = W - right;
    const double aw = ax.p1 - ax.p0;
    // As many ticks as fit with their labels at least kMinTickLabelGap apart.
    for (int max_ticks = std::clamp(static_cast<int>(aw / 40), 3, 10); max_ticks >= 2;
         --max_ticks) {
      ax.make_ticks(max_ticks);
      double widest = 0;
      for (const auto& s : ax.labels) widest = std::max(widest, m.text_width(s, kTickFont));
      if (ax.ticks.size() < 2) break;
      const double spacing = std::fabs(ax.map(ax.ticks[1]) - ax.map(ax.ticks[0]));
      if (widest + kMinTickLabelGap <= spacing) break;
    }
    // The last label may stick out to the right of the axes.
    const double last_half = m.text_width(ax.labels.back(), kTickFont) / 2;
    const double overflow = ax.map(ax.ticks.back()) + last_half - (W - kOuterPad);
    if (overflow <= 0) break;
    right += overflow;
  }
  ax.minor_ticks = log_minor_ticks(ax);
  ay.minor_ticks = log_minor_ticks(ay);
  L.axes = Box{ax.p0, ay.p1, ax.p1 - ax.p0, ay.p0 - ay.p1};
  const Box& axes = L.axes;
  ATTN_CHECK(axes.w > 20 && axes.h > 20, ValueError,
             "LinePlot: the figure ({} x {} points) is too small for its labels", W, H);

  // ---- text around the axes ----
  L.xtick_top = axes.y + axes.h + kTickLength + kTickPad;
  L.xlabel_top = axes.y + axes.h + kTickLength + kTickPad + L.tick_line + kLabelPad;
  L.ylabel_x = axes.x - kTickLength - kTickPad - L.ytick_width - kLabelPad;
  L.title_bottom = axes.y - kTitleGap;

  L.legend = layout_legend(o, series, axes, ax, ay, m);
  L.size = {W, H};
  return L;
}

}  // namespace attn::viz::detail
