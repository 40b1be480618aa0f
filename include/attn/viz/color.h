// attn/viz/color.h — colours and the colormaps of the heatmaps.
#pragma once

#include <string_view>

namespace attn::viz {

// An sRGB colour, each channel in [0, 1].
struct Color {
  double r = 0, g = 0, b = 0, a = 1;

  // "#rrggbb" or "#rrggbbaa"; ValueError otherwise.
  static Color hex(std::string_view text);
  Color with_alpha(double alpha) const { return {r, g, b, alpha}; }
  friend bool operator==(const Color&, const Color&) = default;
};

// matplotlib's default colour cycle ("tab10"), the colours of lines that do
// not name one: C0 blue, C1 orange, C2 green, C3 red, ...
Color cycle_color(int index);

// The colormaps of matplotlib that the book's heatmaps use. Each is a table of
// anchor colours from matplotlib's own definition (Reds and Blues: its 9
// ColorBrewer anchors; viridis: 17 samples of its 256-entry table),
// interpolated linearly in sRGB between anchors as matplotlib's
// LinearSegmentedColormap does. Measured against matplotlib 3.6 on 1001 points:
// at most 2/255 off per channel for Reds and Blues, 6/255 for viridis
// (11 samples gave 13/255 near the yellow end; interpolating in OKLab instead
// of sRGB was not closer).
enum class Colormap {
  reds,  // white to dark red, d2l's default for attention weights
  blues,  // white to dark blue
  viridis,  // dark purple to yellow, perceptually uniform
};

std::string_view colormap_name(Colormap cmap);
// "reds"/"Reds", "blues"/"Blues", "viridis"; ValueError naming the choices otherwise.
Colormap colormap_from_name(std::string_view name);

// The colour at t in [0, 1] (clamped); t = 0 is the low end of the map.
Color colormap_color(Colormap cmap, double t);

}  // namespace attn::viz
