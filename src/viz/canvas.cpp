#include "canvas.h"

#include <cairo-svg.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numbers>

#include "attn/core/error.h"

namespace attn::viz::detail {

// ---- Canvas ----

Canvas::Canvas(cairo_t* cr) : cr_(cr) {
  // Unhinted metrics: text widths do not depend on the surface or its scale,
  // so the measuring pass and every output lay out identically.
  cairo_font_options_t* options = cairo_font_options_create();
  cairo_font_options_set_hint_metrics(options, CAIRO_HINT_METRICS_OFF);
  cairo_font_options_set_hint_style(options, CAIRO_HINT_STYLE_NONE);
  cairo_font_options_set_antialias(options, CAIRO_ANTIALIAS_GRAY);
  cairo_set_font_options(cr_, options);
  cairo_font_options_destroy(options);
  cairo_set_line_join(cr_, CAIRO_LINE_JOIN_ROUND);
  set_font(10, false);
}

void Canvas::set_font(double size, bool bold) const {
  cairo_select_font_face(cr_, kFontFamily, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr_, size);
}

double Canvas::text_width(std::string_view text, double size, bool bold) const {
  set_font(size, bold);
  std::string s(text);
  cairo_text_extents_t ext;
  cairo_text_extents(cr_, s.c_str(), &ext);
  return ext.x_advance;
}

double Canvas::cap_height(double size) const {
  set_font(size, false);
  cairo_text_extents_t ext;
  cairo_text_extents(cr_, "H", &ext);
  return ext.height;
}

double Canvas::descent(double size) const {
  set_font(size, false);
  cairo_font_extents_t ext;
  cairo_font_extents(cr_, &ext);
  return ext.descent;
}

void Canvas::text(std::string_view text, double x, double y, double size, HAlign h, VAlign v,
                  double angle, Color color, bool bold) {
  if (text.empty()) return;
  const double w = text_width(text, size, bold);
  const double cap = cap_height(size);
  const double desc = descent(size);
  double dx = 0, dy = 0;
  switch (h) {
    case HAlign::left: dx = 0; break;
    case HAlign::center: dx = -w / 2; break;
    case HAlign::right: dx = -w; break;
  }
  switch (v) {
    case VAlign::top: dy = cap; break;
    case VAlign::cap_center: dy = cap / 2; break;
    case VAlign::baseline: dy = 0; break;
    case VAlign::bottom: dy = -desc; break;
  }
  std::string s(text);
  cairo_save(cr_);
  set_font(size, bold);
  set_color(color);
  cairo_translate(cr_, x, y);
  if (angle != 0) cairo_rotate(cr_, -angle * std::numbers::pi / 180);
  cairo_move_to(cr_, dx, dy);
  cairo_show_text(cr_, s.c_str());
  cairo_new_path(cr_);
  cairo_restore(cr_);
}

void Canvas::set_color(Color c) { cairo_set_source_rgba(cr_, c.r, c.g, c.b, c.a); }

void Canvas::line(double x0, double y0, double x1, double y1, double width, Color color) {
  set_color(color);
  cairo_set_line_width(cr_, width);
  cairo_move_to(cr_, x0, y0);
  cairo_line_to(cr_, x1, y1);
  cairo_stroke(cr_);
}

void Canvas::fill_rect(double x, double y, double w, double h, Color color) {
  set_color(color);
  cairo_rectangle(cr_, x, y, w, h);
  cairo_fill(cr_);
}

void Canvas::stroke_rect(double x, double y, double w, double h, double width, Color color) {
  set_color(color);
  cairo_set_line_width(cr_, width);
  cairo_rectangle(cr_, x, y, w, h);
  cairo_stroke(cr_);
}

// ---- surfaces ----

namespace {

cairo_status_t append_to_string(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

void check_cairo(cairo_status_t status, const char* what) {
  ATTN_CHECK(status == CAIRO_STATUS_SUCCESS, InternalError, "viz: {} failed: {}", what,
             cairo_status_to_string(status));
}

// White page, then the figure.
void draw_page(cairo_t* cr, const FigureSize& size,
               const std::function<FigureSize(Canvas&)>& draw) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_rectangle(cr, 0, 0, size.width, size.height);
  cairo_fill(cr);
  Canvas canvas(cr);
  draw(canvas);
  check_cairo(cairo_status(cr), "drawing");
}

}  // namespace

namespace {
// Owners of cairo objects: released on every path out, exceptions included.
struct SurfaceDeleter {
  void operator()(cairo_surface_t* s) const { cairo_surface_destroy(s); }
};
struct ContextDeleter {
  void operator()(cairo_t* cr) const { cairo_destroy(cr); }
};
using Surface = std::unique_ptr<cairo_surface_t, SurfaceDeleter>;
using Context = std::unique_ptr<cairo_t, ContextDeleter>;
}  // namespace

FigureSize measure(const std::function<FigureSize(Canvas&)>& draw) {
  Surface surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1));
  Context cr(cairo_create(surface.get()));
  FigureSize size;
  {
    Canvas canvas(cr.get());
    size = draw(canvas);
  }
  check_cairo(cairo_status(cr.get()), "measuring");
  return size;
}

std::string render_svg(const FigureSize& size, const std::function<FigureSize(Canvas&)>& draw) {
  std::string out;
  Surface surface(
      cairo_svg_surface_create_for_stream(append_to_string, &out, size.width, size.height));
  check_cairo(cairo_surface_status(surface.get()), "creating the SVG surface");
  cairo_svg_surface_set_document_unit(surface.get(), CAIRO_SVG_UNIT_PT);
  {
    Context cr(cairo_create(surface.get()));
    draw_page(cr.get(), size, draw);
  }
  cairo_surface_finish(surface.get());
  check_cairo(cairo_surface_status(surface.get()), "writing the SVG");
  // cairo numbers the page group from a process-wide counter (<g id="surface8">);
  // pin it so that the same figure always gives the same bytes.
  const std::string marker = "<g id=\"surface";
  if (std::size_t at = out.find(marker); at != std::string::npos) {
    const std::size_t digits = at + marker.size();
    std::size_t end = digits;
    while (end < out.size() && std::isdigit(static_cast<unsigned char>(out[end]))) ++end;
    out.erase(digits, end - digits);
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(digits), '1');
  }
  return out;
}

std::string render_png(const FigureSize& size, double scale,
                       const std::function<FigureSize(Canvas&)>& draw) {
  ATTN_CHECK(std::isfinite(scale) && scale > 0 && scale <= 16, ValueError,
             "Figure::png: scale must be in (0, 16], got {}", scale);
  const int w = std::max(1, static_cast<int>(std::ceil(size.width * scale - 1e-6)));
  const int h = std::max(1, static_cast<int>(std::ceil(size.height * scale - 1e-6)));
  ATTN_CHECK(static_cast<double>(w) * h <= 2.5e8, ValueError,
             "Figure::png: the picture would be {} x {} pixels; use a smaller scale", w, h);
  Surface surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h));
  check_cairo(cairo_surface_status(surface.get()), "creating the PNG surface");
  {
    Context cr(cairo_create(surface.get()));
    cairo_scale(cr.get(), scale, scale);
    draw_page(cr.get(), size, draw);
  }
  std::string out;
  cairo_status_t status = cairo_surface_write_to_png_stream(surface.get(), append_to_string, &out);
  check_cairo(status, "encoding the PNG");
  return out;
}

}  // namespace attn::viz::detail
