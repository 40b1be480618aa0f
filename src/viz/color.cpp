#include "attn/viz/color.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <string>

#include "attn/core/error.h"

namespace attn::viz {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr Color rgb(unsigned hex) {
  return {((hex >> 16) & 0xff) / 255.0, ((hex >> 8) & 0xff) / 255.0, (hex & 0xff) / 255.0, 1.0};
}

// matplotlib/_cm.py: _Reds_data and _Blues_data, ColorBrewer's 9-class sequential schemes.
constexpr std::array<Color, 9> kReds = {rgb(0xfff5f0), rgb(0xfee0d2), rgb(0xfcbba1),
                                        rgb(0xfc9272), rgb(0xfb6a4a), rgb(0xef3b2c),
                                        rgb(0xcb181d), rgb(0xa50f15), rgb(0x67000d)};
constexpr std::array<Color, 9> kBlues = {rgb(0xf7fbff), rgb(0xdeebf7), rgb(0xc6dbef),
                                         rgb(0x9ecae1), rgb(0x6baed6), rgb(0x4292c6),
                                         rgb(0x2171b5), rgb(0x08519c), rgb(0x08306b)};
// matplotlib/_cm_listed.py: _viridis_data at i/16, i = 0..16.
constexpr std::array<Color, 17> kViridis = {
    rgb(0x440154), rgb(0x48186a), rgb(0x472d7b), rgb(0x424086), rgb(0x3b528b), rgb(0x33638d),
    rgb(0x2c728e), rgb(0x26828e), rgb(0x21918c), rgb(0x1fa088), rgb(0x28ae80), rgb(0x3fbc73),
    rgb(0x5ec962), rgb(0x84d44b), rgb(0xaddc30), rgb(0xd8e219), rgb(0xfde725)};

// matplotlib's "tab10" (the default property cycle).
constexpr std::array<Color, 10> kTab10 = {
    rgb(0x1f77b4), rgb(0xff7f0e), rgb(0x2ca02c), rgb(0xd62728), rgb(0x9467bd),
    rgb(0x8c564b), rgb(0xe377c2), rgb(0x7f7f7f), rgb(0xbcbd22), rgb(0x17becf)};

std::span<const Color> anchors(Colormap cmap) {
  switch (cmap) {
    case Colormap::reds: return kReds;
    case Colormap::blues: return kBlues;
    case Colormap::viridis: return kViridis;
  }
  throw InternalError("colormap_color: unknown colormap");
}

}  // namespace

Color Color::hex(std::string_view text) {
  const bool ok_length = text.size() == 7 || text.size() == 9;
  ATTN_CHECK(ok_length && text[0] == '#', ValueError,
             "Color::hex: expected \"#rrggbb\" or \"#rrggbbaa\", got \"{}\"", text);
  double channels[4] = {0, 0, 0, 1};
  for (std::size_t i = 1, c = 0; i < text.size(); i += 2, ++c) {
    int hi = hex_digit(text[i]), lo = hex_digit(text[i + 1]);
    ATTN_CHECK(hi >= 0 && lo >= 0, ValueError,
               "Color::hex: expected hexadecimal digits, got \"{}\"", text);
    channels[c] = (hi * 16 + lo) / 255.0;
  }
  return {channels[0], channels[1], channels[2], channels[3]};
}

Color cycle_color(int index) {
  const int n = static_cast<int>(kTab10.size());
  return kTab10[static_cast<std::size_t>(((index % n) + n) % n)];
}

std::string_view colormap_name(Colormap cmap) {
  switch (cmap) {
    case Colormap::reds: return "reds";
    case Colormap::blues: return "blues";
    case Colormap::viridis: return "viridis";
  }
  return "?";
}

Colormap colormap_from_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (Colormap c : {Colormap::reds, Colormap::blues, Colormap::viridis})
    if (lower == colormap_name(c)) return c;
  throw ValueError(fmt::format(
      "colormap_from_name: unknown colormap \"{}\"; expected reds, blues or viridis", name));
}

Color colormap_color(Colormap cmap, double t) {
  std::span<const Color> a = anchors(cmap);
  if (!(t > 0)) return a.front();  // also NaN
  if (t >= 1) return a.back();
  const double x = t * static_cast<double>(a.size() - 1);
  const std::size_t i = std::min(static_cast<std::size_t>(x), a.size() - 2);
  const double f = x - static_cast<double>(i);
  const Color& p = a[i];
  const Color& q = a[i + 1];
  return {p.r + (q.r - p.r) * f, p.g + (q.g - p.g) * f, p.b + (q.b - p.b) * f, 1.0};
}

}  // namespace attn::viz
