#include "attn/viz/line_plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

#include "canvas.h"

namespace attn::viz {

using detail::Canvas;
using detail::HAlign;
using detail::VAlign;

namespace {

constexpr double kTickFont = 9, kLabelFont = 10, kTitleFont = 11, kLegendFont = 9;
constexpr double kTickLength = 3.5, kTickPad = 2.5, kLabelPad = 4, kOuterPad = 8;
constexpr double kFrameWidth = 0.8, kGridWidth = 0.7;
constexpr double kMargin = 0.05;  // matplotlib's axes.xmargin / ymargin
const Color kBlack{0, 0, 0, 1};
const Color kGridColor{0.85, 0.85, 0.85, 1};
const Color kLegendEdge{0.8, 0.8, 0.8, 1};

std::string series_name(const Series& s, std::size_t index) {
  return s.label.empty() ? fmt::format("#{}", index) : fmt::format("'{}'", s.label);
}

// One axis: the data-to-page mapping and its ticks.
struct Axis {
  double lo = 0, hi = 1;  // visible data range
  bool log = false;
  double p0 = 0, p1 = 1;  // page coordinates of lo and hi
  std::vector<double> ticks;
  std::vector<std::string> labels;

  double t(double v) const { return log ? std::log10(v) : v; }
  double map(double v) const { return p0 + (t(v) - t(lo)) / (t(hi) - t(lo)) * (p1 - p0); }
  void make_ticks(int max_ticks) {
    if (log) {
      ticks = detail::log_ticks(lo, hi, max_ticks);
      labels = detail::format_log_ticks(ticks);
    } else {
      ticks = detail::nice_ticks(lo, hi, max_ticks);
      labels = detail::format_ticks(ticks);
    }
  }
};

// The visible range: the data (or the fixed limits) plus matplotlib's 5%
// margin on each free end, in log space on a log axis.
Axis make_axis(double data_lo, double data_hi, std::optional<double> fixed_lo,
               std::optional<double> fixed_hi, bool log) {
  Axis a;
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

void set_dash(cairo_t* cr, LineStyle style, double lw) {
  // matplotlib's dash patterns, in units of the line width.
  static const double kDashed[] = {3.7, 1.6};
  static const double kDashDot[] = {6.4, 1.6, 1.0, 1.6};
  static const double kDotted[] = {1.0, 1.65};
  const double* pattern = nullptr;
  int n = 0;
  switch (style) {
    case LineStyle::dashed:
      pattern = kDashed;
      n = 2;
      break;
    case LineStyle::dash_dot:
      pattern = kDashDot;
      n = 4;
      break;
    case LineStyle::dotted:
      pattern = kDotted;
      n = 2;
      break;
    default: break;
  }
  if (n == 0) {
    cairo_set_dash(cr, nullptr, 0, 0);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
    return;
  }
  double scaled[4];
  for (int i = 0; i < n; ++i) scaled[i] = pattern[i] * lw;
  cairo_set_dash(cr, scaled, n, 0);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
}

void draw_marker(Canvas& canvas, Marker m, double x, double y, double size, Color color) {
  cairo_t* cr = canvas.cr();
  const double r = size / 2;
  cairo_new_path(cr);
  cairo_set_dash(cr, nullptr, 0, 0);
  canvas.set_color(color);
  switch (m) {
    case Marker::none: return;
    case Marker::circle:
      cairo_arc(cr, x, y, r, 0, 2 * std::numbers::pi);
      cairo_fill(cr);
      return;
    case Marker::point:
      cairo_arc(cr, x, y, r / 2.5, 0, 2 * std::numbers::pi);
      cairo_fill(cr);
      return;
    case Marker::square:
      cairo_rectangle(cr, x - r * 0.85, y - r * 0.85, r * 1.7, r * 1.7);
      cairo_fill(cr);
      return;
    case Marker::triangle:
      cairo_move_to(cr, x, y - r);
      cairo_line_to(cr, x + r * 0.9, y + r * 0.6);
      cairo_line_to(cr, x - r * 0.9, y + r * 0.6);
      cairo_close_path(cr);
      cairo_fill(cr);
      return;
    case Marker::cross:
    case Marker::plus: {
      const double d = m == Marker::cross ? r * 0.8 : r;
      cairo_set_line_width(cr, 1.2);
      cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
      if (m == Marker::cross) {
        cairo_move_to(cr, x - d, y - d), cairo_line_to(cr, x + d, y + d);
        cairo_move_to(cr, x - d, y + d), cairo_line_to(cr, x + d, y - d);
      } else {
        cairo_move_to(cr, x - d, y), cairo_line_to(cr, x + d, y);
        cairo_move_to(cr, x, y - d), cairo_line_to(cr, x, y + d);
      }
      cairo_stroke(cr);
      return;
    }
  }
}

struct Box {
  double x, y, w, h;
  bool contains(double px, double py) const {
    return px >= x && px <= x + w && py >= y && py <= y + h;
  }
};

}  // namespace

// ---- format strings ----

void apply_format(Series& s, std::string_view fmt) {
  static constexpr std::string_view kColors = "bgrcmykw";
  static const std::array<Color, 8> kColorValues = {
      Color{0, 0, 1, 1},       Color{0, 0.5, 0, 1},     Color{1, 0, 0, 1}, Color{0, 0.75, 0.75, 1},
      Color{0.75, 0, 0.75, 1}, Color{0.75, 0.75, 0, 1}, Color{0, 0, 0, 1}, Color{1, 1, 1, 1}};
  bool has_color = false, has_marker = false, has_line = false;
  LineStyle line = LineStyle::solid;
  Marker marker = Marker::none;
  auto fail = [&](std::string_view why) {
    throw ValueError(
        fmt::format("plot: bad format string \"{}\": {}; expected [colour][marker][line] like "
                    "\"-\", \"m--\", \"g-.\", "
                    "\"r:\", \"o\" (colours bgrcmykw, markers o s ^ x + ., lines - -- -. :)",
                    fmt, why));
  };
  for (std::size_t i = 0; i < fmt.size();) {
    const char ch = fmt[i];
    if (ch == '-' || ch == ':') {
      if (has_line) fail("two line styles");
      has_line = true;
      if (fmt.substr(i, 2) == "--")
        line = LineStyle::dashed, i += 2;
      else if (fmt.substr(i, 2) == "-.")
        line = LineStyle::dash_dot, i += 2;
      else if (ch == '-')
        line = LineStyle::solid, i += 1;
      else
        line = LineStyle::dotted, i += 1;
    } else if (kColors.find(ch) != std::string_view::npos) {
      if (has_color) fail("two colours");
      has_color = true;
      s.color = kColorValues[kColors.find(ch)];
      ++i;
    } else if (std::string_view("os^x+.").find(ch) != std::string_view::npos) {
      if (has_marker) fail("two markers");
      has_marker = true;
      marker = ch == 'o'   ? Marker::circle
               : ch == 's' ? Marker::square
               : ch == '^' ? Marker::triangle
               : ch == 'x' ? Marker::cross
               : ch == '+' ? Marker::plus
                           : Marker::point;
      ++i;
    } else {
      fail(fmt::format("unknown character '{}'", ch));
    }
  }
  s.marker = marker;
  s.line = has_line || !has_marker ? line : LineStyle::none;
}

// ---- LinePlot ----

LinePlot::LinePlot(LinePlotOptions options) : options_(std::move(options)) {
  const auto& o = options_;
  ATTN_CHECK(std::isfinite(o.width) && std::isfinite(o.height) && o.width >= 80 && o.height >= 60 &&
                 o.width <= 5000 && o.height <= 5000,
             ValueError, "LinePlot: the figure must be 80..5000 x 60..5000 points, got {} x {}",
             o.width, o.height);
  auto check_limit = [](std::optional<double> v, const char* name) {
    if (v)
      ATTN_CHECK(std::isfinite(*v), ValueError, "LinePlot: {} must be finite, got {}", name, *v);
  };
  check_limit(o.xmin, "xmin");
  check_limit(o.xmax, "xmax");
  check_limit(o.ymin, "ymin");
  check_limit(o.ymax, "ymax");
  if (o.xmin && o.xmax)
    ATTN_CHECK(*o.xmin < *o.xmax, ValueError, "LinePlot: xmin {} must be below xmax {}", *o.xmin,
               *o.xmax);
  if (o.ymin && o.ymax)
    ATTN_CHECK(*o.ymin < *o.ymax, ValueError, "LinePlot: ymin {} must be below ymax {}", *o.ymin,
               *o.ymax);
  if (o.log_x) {
    ATTN_CHECK(!o.xmin || *o.xmin > 0, ValueError,
               "LinePlot: xmin must be positive on a log axis, got {}", *o.xmin);
    ATTN_CHECK(!o.xmax || *o.xmax > 0, ValueError,
               "LinePlot: xmax must be positive on a log axis, got {}", *o.xmax);
  }
  if (o.log_y) {
    ATTN_CHECK(!o.ymin || *o.ymin > 0, ValueError,
               "LinePlot: ymin must be positive on a log axis, got {}", *o.ymin);
    ATTN_CHECK(!o.ymax || *o.ymax > 0, ValueError,
               "LinePlot: ymax must be positive on a log axis, got {}", *o.ymax);
  }
}

LinePlot& LinePlot::add(Series s) {
  const std::string name = series_name(s, series_.size());
  ATTN_CHECK(!s.y.empty(), ValueError, "LinePlot: series {} is empty", name);
  ATTN_CHECK(s.x.size() == s.y.size(), ValueError,
             "LinePlot: series {} has {} x values but {} y values", name, s.x.size(), s.y.size());
  auto check_values = [&](const std::vector<double>& v, const char* axis, bool log) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      ATTN_CHECK(std::isfinite(v[i]), ValueError, "LinePlot: series {} has {} at {}[{}]", name,
                 std::isnan(v[i]) ? "NaN" : (v[i] > 0 ? "inf" : "-inf"), axis, i);
      ATTN_CHECK(!log || v[i] > 0, ValueError,
                 "LinePlot: series {} has {}[{}] = {}, but the {} axis is logarithmic (values must "
                 "be > 0)",
                 name, axis, i, v[i], axis);
    }
  };
  check_values(s.x, "x", options_.log_x);
  check_values(s.y, "y", options_.log_y);
  ATTN_CHECK(s.line_width >= 0 && s.line_width <= 50 && s.marker_size >= 0 && s.marker_size <= 100,
             ValueError, "LinePlot: series {} has line width {} / marker size {} out of range",
             name, s.line_width, s.marker_size);
  ATTN_CHECK(s.alpha >= 0 && s.alpha <= 1, ValueError,
             "LinePlot: series {} has alpha {}; expected 0..1", name, s.alpha);
  if (!s.color) s.color = cycle_color(next_cycle_color_++);
  series_.push_back(std::move(s));
  return *this;
}

LinePlot& LinePlot::plot(std::string label, std::vector<double> x, std::vector<double> y,
                         std::string_view fmt) {
  Series s;
  s.label = std::move(label);
  s.x = std::move(x);
  s.y = std::move(y);
  apply_format(s, fmt);
  return add(std::move(s));
}

LinePlot& LinePlot::plot(std::string label, const Tensor& x, const Tensor& y,
                         std::string_view fmt) {
  ATTN_CHECK(x.defined() && y.defined(), ValueError,
             "LinePlot::plot: series '{}' has an undefined tensor", label);
  ATTN_CHECK(x.dim() <= 1 && y.dim() <= 1, ShapeError,
             "LinePlot::plot: series '{}' needs 1-D x and y, got shapes {} and {}", label,
             shape_str(x.shape()), shape_str(y.shape()));
  return plot(std::move(label), to_vector<double>(x), to_vector<double>(y), fmt);
}

LinePlot& LinePlot::scatter(std::string label, std::vector<double> x, std::vector<double> y,
                            Marker marker, std::optional<Color> color, double alpha) {
  Series s;
  s.label = std::move(label);
  s.x = std::move(x);
  s.y = std::move(y);
  s.line = LineStyle::none;
  s.marker = marker == Marker::none ? Marker::circle : marker;
  s.color = color;
  s.alpha = alpha;
  return add(std::move(s));
}

FigureSize LinePlot::draw(Canvas& canvas) const {
  const LinePlotOptions& o = options_;
  ATTN_CHECK(!series_.empty(), ValueError, "LinePlot: nothing to draw: no series were added");
  cairo_t* cr = canvas.cr();
  const double W = o.width, H = o.height;

  // ---- axis ranges ----
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const Series& s : series_) {
    for (double v : s.x) xlo = std::min(xlo, v), xhi = std::max(xhi, v);
    for (double v : s.y) ylo = std::min(ylo, v), yhi = std::max(yhi, v);
  }
  Axis ax = make_axis(xlo, xhi, o.xmin, o.xmax, o.log_x);
  Axis ay = make_axis(ylo, yhi, o.ymin, o.ymax, o.log_y);

  // ---- layout: vertical first (it fixes the y ticks), then horizontal ----
  const double tick_line = canvas.line_height(kTickFont);
  const double label_line = canvas.line_height(kLabelFont);
  const double top = kOuterPad + (o.title.empty() ? canvas.cap_height(kTickFont) / 2
                                                  : canvas.line_height(kTitleFont) + 7);
  const double bottom = kOuterPad + kTickLength + kTickPad + tick_line +
                        (o.xlabel.empty() ? 0 : kLabelPad + label_line);
  ay.p0 = H - bottom;
  ay.p1 = top;
  ay.make_ticks(std::clamp(static_cast<int>((ay.p0 - ay.p1) / 26), 3, 9));
  double ytick_w = 0;
  for (const auto& s : ay.labels) ytick_w = std::max(ytick_w, canvas.text_width(s, kTickFont));
  const double left = kOuterPad + (o.ylabel.empty() ? 0 : label_line + kLabelPad) + ytick_w +
                      kTickPad + kTickLength;
  double right = kOuterPad + 4;
  ax.p0 = left;
  for (int pass = 0; pass < 2; ++pass) {
    ax.p1 = W - right;
    const double aw = ax.p1 - ax.p0;
    // As many ticks as fit with their labels at least 14 pt apart.
    for (int max_ticks = std::clamp(static_cast<int>(aw / 40), 3, 10); max_ticks >= 2;
         --max_ticks) {
      ax.make_ticks(max_ticks);
      double widest = 0;
      for (const auto& s : ax.labels) widest = std::max(widest, canvas.text_width(s, kTickFont));
      if (ax.ticks.size() < 2) break;
      const double spacing = std::fabs(ax.map(ax.ticks[1]) - ax.map(ax.ticks[0]));
      if (widest + 14 <= spacing) break;
    }
    // The last label may stick out to the right of the axes.
    const double last_half = canvas.text_width(ax.labels.back(), kTickFont) / 2;
    const double overflow = ax.map(ax.ticks.back()) + last_half - (W - kOuterPad);
    if (overflow <= 0) break;
    right += overflow;
  }
  const Box axes{ax.p0, ay.p1, ax.p1 - ax.p0, ay.p0 - ay.p1};
  ATTN_CHECK(axes.w > 20 && axes.h > 20, ValueError,
             "LinePlot: the figure ({} x {} points) is too small for its labels", W, H);

  // ---- grid, data, frame ----
  if (o.grid) {
    for (double t : ax.ticks) {
      const double x = ax.map(t);
      canvas.line(x, axes.y, x, axes.y + axes.h, kGridWidth, kGridColor);
    }
    for (double t : ay.ticks) {
      const double y = ay.map(t);
      canvas.line(axes.x, y, axes.x + axes.w, y, kGridWidth, kGridColor);
    }
  }
  cairo_save(cr);
  cairo_rectangle(cr, axes.x, axes.y, axes.w, axes.h);
  cairo_clip(cr);
  for (const Series& s : series_) {
    const Color color = s.color->with_alpha(s.color->a * s.alpha);
    if (s.line != LineStyle::none && s.line_width > 0) {
      cairo_new_path(cr);
      for (std::size_t i = 0; i < s.x.size(); ++i) {
        const double px = ax.map(s.x[i]), py = ay.map(s.y[i]);
        if (i == 0)
          cairo_move_to(cr, px, py);
        else
          cairo_line_to(cr, px, py);
      }
      if (s.x.size() == 1) cairo_rel_line_to(cr, 0, 0);  // a dot
      set_dash(cr, s.line, s.line_width);
      cairo_set_line_width(cr, s.line_width);
      canvas.set_color(color);
      cairo_stroke(cr);
      cairo_set_dash(cr, nullptr, 0, 0);
    }
    if (s.marker != Marker::none)
      for (std::size_t i = 0; i < s.x.size(); ++i)
        draw_marker(canvas, s.marker, ax.map(s.x[i]), ay.map(s.y[i]), s.marker_size, color);
  }
  cairo_restore(cr);
  canvas.stroke_rect(axes.x, axes.y, axes.w, axes.h, kFrameWidth, kBlack);

  // ---- ticks and labels ----
  for (std::size_t i = 0; i < ax.ticks.size(); ++i) {
    const double x = ax.map(ax.ticks[i]);
    canvas.line(x, axes.y + axes.h, x, axes.y + axes.h + kTickLength, kFrameWidth, kBlack);
    canvas.text(ax.labels[i], x, axes.y + axes.h + kTickLength + kTickPad, kTickFont,
                HAlign::center, VAlign::top);
  }
  // Unlabelled minor ticks at 2..9 x 10^k on log axes, as matplotlib draws them.
  auto minor_ticks = [](const Axis& a) {
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
  };
  for (double t : minor_ticks(ax)) {
    const double x = ax.map(t);
    canvas.line(x, axes.y + axes.h, x, axes.y + axes.h + kTickLength * 0.6, kFrameWidth * 0.75,
                kBlack);
  }
  for (double t : minor_ticks(ay)) {
    const double y = ay.map(t);
    canvas.line(axes.x - kTickLength * 0.6, y, axes.x, y, kFrameWidth * 0.75, kBlack);
  }
  for (std::size_t i = 0; i < ay.ticks.size(); ++i) {
    const double y = ay.map(ay.ticks[i]);
    canvas.line(axes.x - kTickLength, y, axes.x, y, kFrameWidth, kBlack);
    canvas.text(ay.labels[i], axes.x - kTickLength - kTickPad, y, kTickFont, HAlign::right,
                VAlign::cap_center);
  }
  if (!o.xlabel.empty())
    canvas.text(o.xlabel, axes.x + axes.w / 2,
                axes.y + axes.h + kTickLength + kTickPad + tick_line + kLabelPad, kLabelFont,
                HAlign::center, VAlign::top);
  if (!o.ylabel.empty())
    canvas.text(o.ylabel, axes.x - kTickLength - kTickPad - ytick_w - kLabelPad,
                axes.y + axes.h / 2, kLabelFont, HAlign::center, VAlign::bottom, 90);
  if (!o.title.empty())
    canvas.text(o.title, axes.x + axes.w / 2, axes.y - 7, kTitleFont, HAlign::center,
                VAlign::bottom);

  // ---- legend ----
  std::vector<const Series*> entries;
  for (const Series& s : series_)
    if (!s.label.empty()) entries.push_back(&s);
  if (o.legend != LegendLocation::none && !entries.empty()) {
    const double pad = 5, handle = 22, gap = 6, row = canvas.line_height(kLegendFont) + 5;
    double label_w = 0;
    for (const Series* s : entries)
      label_w = std::max(label_w, canvas.text_width(s->label, kLegendFont));
    const double bw = pad + handle + gap + label_w + pad;
    const double bh = pad + row * static_cast<double>(entries.size()) - 5 + pad;
    const double inset = 6;
    auto box_at = [&](LegendLocation loc) {
      const double l = axes.x + inset, r = axes.x + axes.w - inset - bw,
                   cx = axes.x + (axes.w - bw) / 2;
      const double t = axes.y + inset, b = axes.y + axes.h - inset - bh,
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
    };
    Box box = box_at(o.legend);
    if (o.legend == LegendLocation::best) {
      // matplotlib's "best": the candidate covering the least data, counting
      // points along each line every 2 pt and every marker.
      static constexpr LegendLocation kOrder[] = {
          LegendLocation::upper_right,  LegendLocation::upper_left,   LegendLocation::lower_left,
          LegendLocation::lower_right,  LegendLocation::center_right, LegendLocation::center_left,
          LegendLocation::lower_center, LegendLocation::upper_center, LegendLocation::center};
      double best = INFINITY;
      for (LegendLocation loc : kOrder) {
        const Box cand = box_at(loc);
        double covered = 0;
        for (const Series& s : series_) {
          for (std::size_t i = 0; i < s.x.size(); ++i) {
            const double px = ax.map(s.x[i]), py = ay.map(s.y[i]);
            if (s.marker != Marker::none && cand.contains(px, py)) covered += 1;
            if (s.line == LineStyle::none || i == 0) continue;
            const double qx = ax.map(s.x[i - 1]), qy = ay.map(s.y[i - 1]);
            const int steps =
                std::clamp(static_cast<int>(std::hypot(px - qx, py - qy) / 2), 1, 1000);
            for (int k = 1; k <= steps; ++k) {
              const double f = static_cast<double>(k) / steps;
              if (cand.contains(qx + (px - qx) * f, qy + (py - qy) * f)) covered += 1;
            }
          }
        }
        if (covered < best) best = covered, box = cand;
      }
    }
    // A rounded white box, slightly see-through, as matplotlib's fancybox.
    const double rad = 3;
    cairo_new_path(cr);
    cairo_arc(cr, box.x + box.w - rad, box.y + rad, rad, -std::numbers::pi / 2, 0);
    cairo_arc(cr, box.x + box.w - rad, box.y + box.h - rad, rad, 0, std::numbers::pi / 2);
    cairo_arc(cr, box.x + rad, box.y + box.h - rad, rad, std::numbers::pi / 2, std::numbers::pi);
    cairo_arc(cr, box.x + rad, box.y + rad, rad, std::numbers::pi, 3 * std::numbers::pi / 2);
    cairo_close_path(cr);
    canvas.set_color(Color{1, 1, 1, 0.85});
    cairo_fill_preserve(cr);
    canvas.set_color(kLegendEdge);
    cairo_set_line_width(cr, kFrameWidth);
    cairo_stroke(cr);
    for (std::size_t e = 0; e < entries.size(); ++e) {
      const Series& s = *entries[e];
      const double cy = box.y + pad + row * static_cast<double>(e) + (row - 5) / 2;
      const Color color = s.color->with_alpha(s.color->a * s.alpha);
      const double hx0 = box.x + pad, hx1 = hx0 + handle;
      if (s.line != LineStyle::none && s.line_width > 0) {
        set_dash(cr, s.line, s.line_width);
        cairo_set_line_width(cr, s.line_width);
        canvas.set_color(color);
        cairo_move_to(cr, hx0, cy);
        cairo_line_to(cr, hx1, cy);
        cairo_stroke(cr);
        cairo_set_dash(cr, nullptr, 0, 0);
      }
      if (s.marker != Marker::none)
        draw_marker(canvas, s.marker, (hx0 + hx1) / 2, cy, s.marker_size, color);
      canvas.text(s.label, hx1 + gap, cy, kLegendFont, HAlign::left, VAlign::cap_center);
    }
  }
  return {W, H};
}

}  // namespace attn::viz
