#include "attn/viz/figure.h"

#include "attn/io/atomic_file.h"
#include "canvas.h"

namespace attn::viz {

FigureSize Figure::size() const {
  return detail::measure([this](detail::Canvas& c) { return draw(c); });
}

std::string Figure::svg() const {
  auto fn = [this](detail::Canvas& c) { return draw(c); };
  return detail::render_svg(detail::measure(fn), fn);
}

std::string Figure::png(double scale) const {
  auto fn = [this](detail::Canvas& c) { return draw(c); };
  return detail::render_png(detail::measure(fn), scale, fn);
}

void Figure::save_svg(const std::filesystem::path& path) const {
  // Render first: a drawing error must not leave a temp file either.
  std::string bytes = svg();
  io::write_file_atomic(path, bytes);
}

void Figure::save_png(const std::filesystem::path& path, double scale) const {
  std::string bytes = png(scale);
  io::write_file_atomic(path, bytes);
}

void Figure::save(const std::filesystem::path& stem, double png_scale) const {
  // Both pictures first, so that a drawing error writes neither file.
  const std::string svg_bytes = svg();
  const std::string png_bytes = png(png_scale);
  io::write_file_atomic(std::filesystem::path(stem.string() + ".svg"), svg_bytes);
  io::write_file_atomic(std::filesystem::path(stem.string() + ".png"), png_bytes);
}

}  // namespace attn::viz
