// src/viz/canvas.h — internal: a cairo context with the text and shape helpers
// the figures draw with, and the surfaces they are rendered to.
//
// Units are points; y grows downwards. Text uses cairo's toy API with
// "DejaVu Sans" and unhinted metrics, so the layout is identical on the SVG
// and the PNG surface (and on the 1x1 surface used only to measure).
#pragma once

#include <cairo.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "attn/viz/color.h"
#include "attn/viz/figure.h"
#include "text_metrics.h"

namespace attn::viz::detail {

enum class HAlign { left, center, right };
// cap_center: the middle of a capital letter (what looks centred for labels);
// top: the top of capitals; baseline; bottom: the lowest descender.
enum class VAlign { top, cap_center, baseline, bottom };

inline constexpr const char* kFontFamily = "DejaVu Sans";

class Canvas : public TextMetrics {
 public:
  explicit Canvas(cairo_t* cr);
  cairo_t* cr() const { return cr_; }

  double text_width(std::string_view text, double size, bool bold = false) const override;
  double cap_height(double size) const override;
  double descent(double size) const override;

  // Draws `text` anchored at (x, y). `angle` in degrees, counter-clockwise
  // (90 reads upwards); the alignment is in the text's own rotated frame.
  void text(std::string_view text, double x, double y, double size, HAlign h, VAlign v,
            double angle = 0, Color color = {}, bool bold = false);

  void set_color(Color c);
  void line(double x0, double y0, double x1, double y1, double width, Color color);
  void fill_rect(double x, double y, double w, double h, Color color);
  void stroke_rect(double x, double y, double w, double h, double width, Color color);

 private:
  void set_font(double size, bool bold) const;
  cairo_t* cr_;
};

// Renders `figure` through `draw` (which returns the size) onto a surface.
// Used by Figure; the surfaces are created here.
std::string render_svg(const FigureSize& size, const std::function<FigureSize(Canvas&)>& draw);
std::string render_png(const FigureSize& size, double scale,
                       const std::function<FigureSize(Canvas&)>& draw);
FigureSize measure(const std::function<FigureSize(Canvas&)>& draw);

}  // namespace attn::viz::detail
