#include "attn/viz/line_plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

#include "canvas.h"
#include "line_plot_layout.h"

namespace attn::viz {

using detail::Box;
using detail::Canvas;
using detail::HAlign;
using detail::VAlign;
using namespace detail::line_plot_style;

namespace {

constexpr double kFrameWidth = 0.8, kGridWidth = 0.7;
const Color kBlack{0, 0, 0, 1};
const Color kGridColor{0.85, 0.85, 0.85, 1};
const Color kLegendEdge{0.8, 0.8, 0.8, 1};

std::string series_name(const Series& s, std::size_t index) {
  return s.label.empty() ? fmt::format("#{}", index) : fmt::format("'{}'", s.label);
}

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

// ---- painting (where things go is line_plot_layout.h's business) ----

namespace {

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

// The series' lines and markers, clipped to the axes.
void paint_series(Canvas& canvas, const std::vector<Series>& series,
                  const detail::LinePlotLayout& L) {
  cairo_t* cr = canvas.cr();
  const Box& axes = L.axes;
  cairo_save(cr);
  cairo_rectangle(cr, axes.x, axes.y, axes.w, axes.h);
  cairo_clip(cr);
  for (const Series& s : series) {
    const Color color = s.color->with_alpha(s.color->a * s.alpha);
    if (s.line != LineStyle::none && s.line_width > 0) {
      cairo_new_path(cr);
      for (std::size_t i = 0; i < s.x.size(); ++i) {
        const double px = L.x.map(s.x[i]), py = L.y.map(s.y[i]);
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
        draw_marker(canvas, s.marker, L.x.map(s.x[i]), L.y.map(s.y[i]), s.marker_size, color);
  }
  cairo_restore(cr);
}

// Major ticks with their labels, minor ticks, the axis labels and the title.
void paint_ticks_and_labels(Canvas& canvas, const LinePlotOptions& o,
                            const detail::LinePlotLayout& L) {
  const Box& axes = L.axes;
  const detail::PlotAxis& ax = L.x;
  const detail::PlotAxis& ay = L.y;
  for (std::size_t i = 0; i < ax.ticks.size(); ++i) {
    const double x = ax.map(ax.ticks[i]);
    canvas.line(x, axes.y + axes.h, x, axes.y + axes.h + kTickLength, kFrameWidth, kBlack);
    canvas.text(ax.labels[i], x, L.xtick_top, kTickFont, HAlign::center, VAlign::top);
  }
  for (double t : ax.minor_ticks) {
    const double x = ax.map(t);
    canvas.line(x, axes.y + axes.h, x, axes.y + axes.h + kTickLength * 0.6, kFrameWidth * 0.75,
                kBlack);
  }
  for (double t : ay.minor_ticks) {
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
    canvas.text(o.xlabel, axes.x + axes.w / 2, L.xlabel_top, kLabelFont, HAlign::center,
                VAlign::top);
  if (!o.ylabel.empty())
    canvas.text(o.ylabel, L.ylabel_x, axes.y + axes.h / 2, kLabelFont, HAlign::center,
                VAlign::bottom, 90);
  if (!o.title.empty())
    canvas.text(o.title, axes.x + axes.w / 2, L.title_bottom, kTitleFont, HAlign::center,
                VAlign::bottom);
}

// A rounded white box, slightly see-through, as matplotlib's fancybox, with a
// line sample, marker and label per entry.
void paint_legend(Canvas& canvas, const std::vector<Series>& series,
                  const detail::LegendLayout& legend) {
  cairo_t* cr = canvas.cr();
  const Box& box = legend.box;
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
  for (std::size_t e = 0; e < legend.entries.size(); ++e) {
    const Series& s = series[legend.entries[e]];
    const double cy = legend.entry_y(e);
    const Color color = s.color->with_alpha(s.color->a * s.alpha);
    const double hx0 = legend.handle_x0(), hx1 = legend.handle_x1();
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
    canvas.text(s.label, hx1 + kLegendGap, cy, kLegendFont, HAlign::left, VAlign::cap_center);
  }
}

}  // namespace

FigureSize LinePlot::draw(Canvas& canvas) const {
  ATTN_CHECK(!series_.empty(), ValueError, "LinePlot: nothing to draw: no series were added");
  const detail::LinePlotLayout L = detail::layout_line_plot(options_, series_, canvas);
  const Box& axes = L.axes;
  if (options_.grid) {
    for (double t : L.x.ticks) {
      const double x = L.x.map(t);
      canvas.line(x, axes.y, x, axes.y + axes.h, kGridWidth, kGridColor);
    }
    for (double t : L.y.ticks) {
      const double y = L.y.map(t);
      canvas.line(axes.x, y, axes.x + axes.w, y, kGridWidth, kGridColor);
    }
  }
  paint_series(canvas, series_, L);
  canvas.stroke_rect(axes.x, axes.y, axes.w, axes.h, kFrameWidth, kBlack);
  paint_ticks_and_labels(canvas, options_, L);
  if (L.legend.shown) paint_legend(canvas, series_, L.legend);
  return L.size;
}

}  // namespace attn::viz
