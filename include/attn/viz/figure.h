// attn/viz/figure.h — what every figure (heatmaps, line plots) can do.
//
// A figure is drawn by ONE routine onto a cairo surface; the same routine
// draws the SVG (vector, sizes in points, 1 pt = 1/72 inch) and the PNG
// (raster, `scale` pixels per point, white background). Files are written
// atomically through attn/io/atomic_file.h: a failed save leaves neither a
// partial file nor a temp file behind, and throws attn::IOError naming the path.
#pragma once

#include <filesystem>
#include <string>

namespace attn::viz {

namespace detail {
class Canvas;  // src/viz/canvas.h: a cairo context with text helpers
}

struct FigureSize {
  double width = 0, height = 0;  // points
};

class Figure {
 public:
  virtual ~Figure() = default;

  // Writes `<stem>.svg` and `<stem>.png` (the stem's own dots are kept:
  // "runs/fig.v1" gives "runs/fig.v1.svg"). The directory must exist.
  void save(const std::filesystem::path& stem, double png_scale = 2.0) const;
  void save_svg(const std::filesystem::path& path) const;
  // `scale` pixels per point: 2 gives a crisp picture on a high-density screen
  // and legible text when viewed at 100%.
  void save_png(const std::filesystem::path& path, double scale = 2.0) const;

  // The encoded file contents, in memory.
  std::string svg() const;
  std::string png(double scale = 2.0) const;

  // The size of the drawing in points (the PNG is scale times this in pixels).
  FigureSize size() const;

 protected:
  // Lays the figure out and draws it on `canvas` with the origin at the
  // top-left corner; returns the size it used. Called once to measure and once
  // per output: it must draw the same thing every time.
  virtual FigureSize draw(detail::Canvas& canvas) const = 0;
};

}  // namespace attn::viz
