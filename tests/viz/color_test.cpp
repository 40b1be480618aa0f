#include "attn/viz/color.h"

#include <gtest/gtest.h>

#include <cmath>

#include "attn/core/error.h"

using namespace attn::viz;

namespace {

void expect_color_near(Color got, Color want, double tol = 1e-9) {
  EXPECT_NEAR(got.r, want.r, tol);
  EXPECT_NEAR(got.g, want.g, tol);
  EXPECT_NEAR(got.b, want.b, tol);
  EXPECT_NEAR(got.a, want.a, tol);
}

}  // namespace

TEST(Color, HexParsesRgbAndRgba) {
  expect_color_near(Color::hex("#ff8000"), {1.0, 128 / 255.0, 0.0, 1.0});
  expect_color_near(Color::hex("#FFFFFF80"), {1, 1, 1, 128 / 255.0});
}

TEST(Color, HexRejectsMalformedText) {
  EXPECT_THROW(Color::hex("ff8000"), attn::ValueError);
  EXPECT_THROW(Color::hex("#ff80"), attn::ValueError);
  EXPECT_THROW(Color::hex("#gg0000"), attn::ValueError);
}

TEST(Color, CycleIsMatplotlibTab10AndWraps) {
  EXPECT_EQ(cycle_color(0), Color::hex("#1f77b4"));
  EXPECT_EQ(cycle_color(1), Color::hex("#ff7f0e"));
  EXPECT_EQ(cycle_color(10), cycle_color(0));
}

TEST(Colormap, EndsAreMatplotlibsFirstAndLastColours) {
  EXPECT_EQ(colormap_color(Colormap::reds, 0), Color::hex("#fff5f0"));
  EXPECT_EQ(colormap_color(Colormap::reds, 1), Color::hex("#67000d"));
  EXPECT_EQ(colormap_color(Colormap::blues, 0), Color::hex("#f7fbff"));
  EXPECT_EQ(colormap_color(Colormap::blues, 1), Color::hex("#08306b"));
  EXPECT_EQ(colormap_color(Colormap::viridis, 0), Color::hex("#440154"));
  EXPECT_EQ(colormap_color(Colormap::viridis, 1), Color::hex("#fde725"));
}

TEST(Colormap, InterpolatesLinearlyBetweenAnchors) {
  // Reds has 9 anchors: t = 0.5 is anchor 4 (#fb6a4a); t = 1/16 is halfway
  // between anchors 0 and 1.
  EXPECT_EQ(colormap_color(Colormap::reds, 0.5), Color::hex("#fb6a4a"));
  Color a = Color::hex("#fff5f0"), b = Color::hex("#fee0d2");
  expect_color_near(colormap_color(Colormap::reds, 1.0 / 16),
                    {(a.r + b.r) / 2, (a.g + b.g) / 2, (a.b + b.b) / 2, 1});
  // viridis(0.5) in matplotlib is #21918c.
  expect_color_near(colormap_color(Colormap::viridis, 0.5), Color::hex("#21918c"), 1.0 / 255);
}

TEST(Colormap, ClampsOutOfRangeAndNaN) {
  EXPECT_EQ(colormap_color(Colormap::blues, -3), colormap_color(Colormap::blues, 0));
  EXPECT_EQ(colormap_color(Colormap::blues, 7), colormap_color(Colormap::blues, 1));
  EXPECT_EQ(colormap_color(Colormap::blues, std::nan("")), colormap_color(Colormap::blues, 0));
}

TEST(Colormap, ReadsAreMonotonicallyDarker) {
  double prev = 10;
  for (int i = 0; i <= 100; ++i) {
    Color c = colormap_color(Colormap::reds, i / 100.0);
    double luma = 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b;
    EXPECT_LT(luma, prev + 1e-12) << "at t = " << i / 100.0;
    prev = luma;
  }
}

TEST(Colormap, NamesRoundTripAndUnknownNameIsAnError) {
  for (Colormap c : {Colormap::reds, Colormap::blues, Colormap::viridis})
    EXPECT_EQ(colormap_from_name(colormap_name(c)), c);
  EXPECT_EQ(colormap_from_name("Reds"), Colormap::reds);
  try {
    colormap_from_name("jet");
    FAIL() << "expected ValueError";
  } catch (const attn::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("jet"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("viridis"), std::string::npos) << e.what();
  }
}
