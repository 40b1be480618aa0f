// Heatmaps and line plots: files written, formats, sizes, and errors.
#include <gtest/gtest.h>

#include <unistd.h>
#include "testing.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "attn/core/error.h"
#include "attn/core/tensor.h"
#include "attn/viz/heatmap.h"
#include "attn/viz/line_plot.h"

namespace fs = std::filesystem;
using namespace attn;
using namespace attn::viz;

// fontconfig and cairo keep process-wide font caches that they never free;
// LeakSanitizer (the asan preset) would report them at exit. They are a fixed
// few KB however many figures are drawn, not leaks of ours.
extern "C" const char* __lsan_default_suppressions() { return "leak:libfontconfig.so\n"; }

namespace {

using PlotTest = attn::testing::TempDirTest;

using attn::testing::read_file;

bool is_png(const std::string& bytes) { return bytes.rfind("\x89PNG\r\n\x1a\n", 0) == 0; }

bool is_svg(const std::string& bytes) {
  return (bytes.rfind("<?xml", 0) == 0 || bytes.rfind("<svg", 0) == 0) &&
         bytes.find("</svg>") != std::string::npos;
}

// Width and height from the PNG's IHDR chunk.
std::pair<std::uint32_t, std::uint32_t> png_size(const std::string& png) {
  auto be32 = [&](std::size_t at) {
    return (std::uint32_t(std::uint8_t(png[at])) << 24) |
           (std::uint32_t(std::uint8_t(png[at + 1])) << 16) |
           (std::uint32_t(std::uint8_t(png[at + 2])) << 8) |
           std::uint32_t(std::uint8_t(png[at + 3]));
  };
  return {be32(16), be32(20)};
}

// The message of the exception of type E that f throws ("" if none).
template <class E>
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

Tensor ramp(const Shape& shape) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) / 6.0f;
  return from_vector(v, shape);
}

LinePlot sine_plot() {
  std::vector<double> x, y;
  for (int i = 0; i < 60; ++i) x.push_back(i), y.push_back(std::sin(i / 5.0));
  LinePlot p({.xlabel = "position", .ylabel = "value"});
  p.plot("sin", x, y, "-");
  return p;
}

}  // namespace

// ---- saving ----

TEST_F(PlotTest, HeatmapSaveWritesSvgAndPng) {
  Heatmaps h(eye(10).reshape({1, 1, 10, 10}), {.xlabel = "Keys", .ylabel = "Queries"});
  h.save(dir_ / "eye");
  EXPECT_EQ(names(), (std::vector<std::string>{"eye.png", "eye.svg"}));
  const std::string png = read_file(dir_ / "eye.png"), svg = read_file(dir_ / "eye.svg");
  EXPECT_TRUE(is_png(png));
  EXPECT_TRUE(is_svg(svg)) << svg.substr(0, 100);
  EXPECT_GT(png.size(), 1000u);
}

TEST_F(PlotTest, SaveKeepsDotsInTheStem) {
  sine_plot().save(dir_ / "fig.v1");
  EXPECT_EQ(names(), (std::vector<std::string>{"fig.v1.png", "fig.v1.svg"}));
}

TEST_F(PlotTest, SaveSvgAndSavePngSeparately) {
  LinePlot p = sine_plot();
  p.save_svg(dir_ / "a.svg");
  p.save_png(dir_ / "b.png", 1.0);
  EXPECT_TRUE(is_svg(read_file(dir_ / "a.svg")));
  EXPECT_TRUE(is_png(read_file(dir_ / "b.png")));
}

TEST_F(PlotTest, PngPixelsAreScaleTimesTheSizeInPoints) {
  Heatmaps h(ramp({6, 9}));
  const FigureSize s = h.size();
  for (double scale : {1.0, 2.0, 3.0}) {
    auto [w, hgt] = png_size(h.png(scale));
    EXPECT_EQ(w, static_cast<std::uint32_t>(std::ceil(s.width * scale - 1e-6)));
    EXPECT_EQ(hgt, static_cast<std::uint32_t>(std::ceil(s.height * scale - 1e-6)));
  }
  EXPECT_THROW(h.png(0), ValueError);
}

TEST_F(PlotTest, SvgDeclaresItsSizeInPoints) {
  LinePlot p({.width = 300, .height = 200});
  p.plot("a", {0, 1, 2}, {1, 3, 2});
  const std::string svg = p.svg();
  EXPECT_NE(svg.find("width=\"300pt\""), std::string::npos) << svg.substr(0, 300);
  EXPECT_NE(svg.find("height=\"200pt\""), std::string::npos) << svg.substr(0, 300);
  auto [w, h] = png_size(p.png(2));
  EXPECT_EQ(w, 600u);
  EXPECT_EQ(h, 400u);
}

TEST_F(PlotTest, RenderingIsDeterministic) {
  Heatmaps h(ramp({2, 3, 5, 5}), {.titles = {"Head 1", "Head 2", "Head 3"}});
  EXPECT_TRUE(h.svg() == h.svg());  // (not EXPECT_EQ: it would print whole files)
  EXPECT_TRUE(h.png() == h.png());
}

TEST_F(PlotTest, SaveIntoMissingDirectoryThrowsIOErrorAndLeavesNothing) {
  const fs::path stem = dir_ / "missing" / "fig";
  std::string msg = message_of<IOError>([&] { sine_plot().save(stem); });
  EXPECT_NE(msg.find((dir_ / "missing").string()), std::string::npos) << msg;
  EXPECT_TRUE(names().empty());
}

TEST_F(PlotTest, FailedPngWriteLeavesNoFileAndNoTempFile) {
  // A directory where the PNG should go: the SVG is written, the PNG fails.
  fs::create_directory(dir_ / "fig.png");
  std::string msg = message_of<IOError>([&] { sine_plot().save(dir_ / "fig"); });
  EXPECT_NE(msg.find((dir_ / "fig.png").string()), std::string::npos) << msg;
  EXPECT_EQ(names(), (std::vector<std::string>{"fig.png", "fig.svg"}));
  EXPECT_TRUE(fs::is_directory(dir_ / "fig.png"));
  EXPECT_TRUE(fs::is_empty(dir_ / "fig.png"));
}

TEST_F(PlotTest, DrawingErrorWritesNothing) {
  LinePlot empty;
  EXPECT_THROW(empty.save(dir_ / "empty"), ValueError);
  EXPECT_THROW(sine_plot().save(dir_ / "bad_scale", -1.0),
               ValueError);  // the PNG fails: no SVG either
  EXPECT_TRUE(names().empty());
}

// ---- heatmaps ----

TEST_F(PlotTest, HeatmapAcceptsTwoThreeAndFourDimensions) {
  Heatmaps two(ramp({4, 5}));
  EXPECT_EQ(two.rows(), 1);
  EXPECT_EQ(two.cols(), 1);
  EXPECT_EQ(two.num_queries(), 4);
  EXPECT_EQ(two.num_keys(), 5);
  Heatmaps three(ramp({3, 4, 5}));
  EXPECT_EQ(three.rows(), 1);
  EXPECT_EQ(three.cols(), 3);
  Heatmaps four(ramp({2, 3, 4, 5}));
  EXPECT_EQ(four.rows(), 2);
  EXPECT_EQ(four.cols(), 3);
  EXPECT_TRUE(is_png(four.png()));
}

TEST_F(PlotTest, HeatmapFromGridOfMatrices) {
  std::vector<std::vector<Tensor>> grid = {{ramp({3, 4}), ramp({3, 4})},
                                           {ramp({3, 4}), ramp({3, 4})}};
  Heatmaps h(grid, {.titles = {"Head 1", "Head 2"}, .row_labels = {"Layer 1", "Layer 2"}});
  EXPECT_EQ(h.rows(), 2);
  EXPECT_EQ(h.cols(), 2);
  EXPECT_TRUE(is_svg(h.svg()));
}

TEST_F(PlotTest, HeatmapScaleDefaultsToDataRangeAndCanBeFixed) {
  Tensor m = from_vector(std::vector<float>{0.1f, 0.2f, 0.3f, 0.7f}, {2, 2});
  Heatmaps automatic(m);
  EXPECT_NEAR(automatic.vmin(), 0.1, 1e-6);
  EXPECT_NEAR(automatic.vmax(), 0.7, 1e-6);
  Heatmaps fixed(m, {.vmin = 0.0, .vmax = 1.0});
  EXPECT_EQ(fixed.vmin(), 0.0);
  EXPECT_EQ(fixed.vmax(), 1.0);
}

TEST_F(PlotTest, FlatHeatmapStillHasAColourRange) {
  Heatmaps h(zeros({3, 3}));
  EXPECT_EQ(h.vmin(), 0.0);
  EXPECT_GT(h.vmax(), 0.0);
  EXPECT_TRUE(is_png(h.png()));
}

TEST_F(PlotTest, HeatmapSizesStayLegibleFromTinyToLarge) {
  // A 4x4 matrix is not a thumbnail; a 100x100 one is not a poster.
  const FigureSize small = Heatmaps(ramp({4, 4})).size();
  const FigureSize large = Heatmaps(ramp({100, 100})).size();
  EXPECT_GT(small.width, 150);
  EXPECT_LT(large.width, 600);
  EXPECT_LT(large.height, 600);
  const FigureSize grid = Heatmaps(ramp({2, 4, 10, 10})).size();
  EXPECT_LT(grid.width, 720);
}

TEST_F(PlotTest, HugeHeatmapKeepsTheSvgSmall) {
  // 300 x 300 cells: drawn as an image, not 90000 rectangles.
  Heatmaps h(ramp({300, 300}));
  EXPECT_LT(h.svg().size(), 2'000'000u);
  EXPECT_TRUE(is_png(h.png()));
}

TEST_F(PlotTest, HeatmapWithTokenLabelsAndFixedCellSize) {
  Heatmaps h(ramp({3, 4}), {.xticklabels = {"i", "'m", "home", "<eos>"},
                            .yticklabels = {"je", "suis", "<eos>"},
                            .cmap = Colormap::viridis,
                            .cell_size = 20});
  EXPECT_TRUE(is_png(h.png()));
  EXPECT_GT(h.size().width, 4 * 20);
}

TEST_F(PlotTest, HeatmapRejectsNonFiniteValuesAndSaysWhere) {
  std::vector<float> v(12, 0.5f);
  v[1 * 4 + 2] = NAN;
  std::string msg = message_of<ValueError>([&] { Heatmaps h(from_vector(v, {3, 4})); });
  EXPECT_NE(msg.find("NaN"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 2]"), std::string::npos) << msg;

  std::vector<float> w(2 * 2 * 2 * 2, 0.5f);
  w[(1 * 2 + 0) * 4 + 3] = -INFINITY;  // panel (1, 0), element [1, 1]
  msg = message_of<ValueError>([&] { Heatmaps h(from_vector(w, {2, 2, 2, 2})); });
  EXPECT_NE(msg.find("-inf"), std::string::npos) << msg;
  EXPECT_NE(msg.find("row 1, col 0"), std::string::npos) << msg;
}

TEST_F(PlotTest, HeatmapRejectsEmptyAndBadShapes) {
  EXPECT_THROW(Heatmaps(zeros({0, 4})), ValueError);
  EXPECT_THROW(Heatmaps{Tensor{}}, ValueError);
  EXPECT_THROW(Heatmaps(std::vector<std::vector<Tensor>>{}), ValueError);
  std::string msg = message_of<ShapeError>([] { Heatmaps(zeros({5})); });
  EXPECT_NE(msg.find("[5]"), std::string::npos) << msg;
  EXPECT_THROW(Heatmaps(zeros({1, 1, 1, 2, 2})), ShapeError);
  // Ragged rows, mismatched panel shapes, a 3-D panel.
  using Grid = std::vector<std::vector<Tensor>>;
  EXPECT_THROW(Heatmaps(Grid{{zeros({2, 2}), zeros({2, 2})}, {zeros({2, 2})}}), ShapeError);
  EXPECT_THROW(Heatmaps(Grid{{zeros({2, 2}), zeros({2, 3})}}), ShapeError);
  EXPECT_THROW(Heatmaps(Grid{{zeros({1, 2, 2})}}), ShapeError);
}

TEST_F(PlotTest, HeatmapRejectsLabelCountsThatDoNotMatch) {
  std::string msg = message_of<ValueError>([] {
    Heatmaps(ramp({2, 3, 4, 4}), {.titles = {"a", "b"}});
  });
  EXPECT_NE(msg.find("expected 3 titles"), std::string::npos) << msg;
  EXPECT_THROW(Heatmaps(ramp({2, 3, 4, 4}), {.row_labels = {"a"}}), ValueError);
  EXPECT_THROW(Heatmaps(ramp({3, 4}), {.xticklabels = {"a", "b", "c"}}), ValueError);
  EXPECT_THROW(Heatmaps(ramp({3, 4}), {.yticklabels = {"a", "b", "c", "d"}}), ValueError);
  EXPECT_THROW(Heatmaps(ramp({3, 4}), {.vmin = 1.0, .vmax = 0.0}), ValueError);
  EXPECT_THROW(Heatmaps(ramp({3, 4}), {.vmin = NAN}), ValueError);
  EXPECT_THROW(Heatmaps(ramp({3, 4}), {.cell_size = -1}), ValueError);
}

// ---- line plots ----

TEST_F(PlotTest, LinePlotWithLegendScatterAndStyles) {
  std::vector<double> x, a, b, c, d;
  for (int i = 0; i < 50; ++i) {
    x.push_back(i * 0.1);
    a.push_back(std::sin(i * 0.1));
    b.push_back(std::cos(i * 0.1));
    c.push_back(0.5);
    d.push_back(-0.5);
  }
  LinePlot p({.title = "t", .xlabel = "x", .ylabel = "y", .ymin = -1.5, .ymax = 1.5});
  p.scatter("points", x, a).plot("cos", x, b, "m--").plot("half", x, c, "g-.").plot("", x, d, "r:");
  ASSERT_EQ(p.series().size(), 4u);
  EXPECT_EQ(p.series()[0].line, LineStyle::none);
  EXPECT_EQ(p.series()[0].alpha, 0.5);
  EXPECT_EQ(*p.series()[0].color, cycle_color(0));
  p.save(dir_ / "lines");
  EXPECT_TRUE(is_png(read_file(dir_ / "lines.png")));
  EXPECT_TRUE(is_svg(read_file(dir_ / "lines.svg")));
}

TEST_F(PlotTest, LinePlotFromTensorsAndLogAxis) {
  Tensor x = arange(1, 101, 1, DType::f32);
  std::vector<double> y;
  for (int i = 1; i <= 100; ++i) y.push_back(std::exp(-i / 10.0));
  LinePlot p({.log_y = true});
  p.plot("loss", x, from_vector(y));
  EXPECT_TRUE(is_png(p.png()));
}

TEST_F(PlotTest, DefaultColoursFollowTheCycleSkippingExplicitOnes) {
  LinePlot p;
  p.plot("a", {0, 1}, {0, 1}, "-")
      .plot("b", {0, 1}, {1, 0}, "r:")
      .plot("c", {0, 1}, {0.5, 0.5}, "--");
  EXPECT_EQ(*p.series()[0].color, cycle_color(0));
  EXPECT_EQ(*p.series()[1].color, (Color{1, 0, 0, 1}));
  EXPECT_EQ(*p.series()[2].color, cycle_color(1));
}

TEST_F(PlotTest, LinePlotRejectsBadSeries) {
  LinePlot p;
  std::string msg = message_of<ValueError>([&] { p.plot("Col 6", {0, 1, 2}, {0, 1}); });
  EXPECT_NE(msg.find("'Col 6'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3 x values but 2 y values"), std::string::npos) << msg;
  msg = message_of<ValueError>([&] { p.plot("Col 7", {0, 1, 2}, {0, NAN, 2}); });
  EXPECT_NE(msg.find("NaN at y[1]"), std::string::npos) << msg;
  msg = message_of<ValueError>([&] { p.plot("Col 8", {0, INFINITY}, {0, 1}); });
  EXPECT_NE(msg.find("inf at x[1]"), std::string::npos) << msg;
  EXPECT_THROW(p.plot("empty", std::vector<double>{}, std::vector<double>{}), ValueError);
  EXPECT_TRUE(p.series().empty());

  LinePlot log_plot({.log_y = true});
  msg = message_of<ValueError>([&] { log_plot.plot("loss", {0, 1}, {1, 0}); });
  EXPECT_NE(msg.find("y[1] = 0"), std::string::npos) << msg;
  EXPECT_THROW(LinePlot({.xmin = 2, .xmax = 1}), ValueError);
  EXPECT_THROW(LinePlot({.width = 10}), ValueError);
  EXPECT_THROW(p.plot("t", zeros({2, 2}), zeros({2, 2})), ShapeError);
}

TEST(FormatString, ParsesMatplotlibStyles) {
  Series s;
  apply_format(s, "-");
  EXPECT_EQ(s.line, LineStyle::solid);
  EXPECT_EQ(s.marker, Marker::none);
  EXPECT_FALSE(s.color.has_value());
  apply_format(s, "m--");
  EXPECT_EQ(s.line, LineStyle::dashed);
  EXPECT_EQ(*s.color, (Color{0.75, 0, 0.75, 1}));
  apply_format(s, "g-.");
  EXPECT_EQ(s.line, LineStyle::dash_dot);
  apply_format(s, "r:");
  EXPECT_EQ(s.line, LineStyle::dotted);
  apply_format(s, "o");
  EXPECT_EQ(s.line, LineStyle::none);
  EXPECT_EQ(s.marker, Marker::circle);
  apply_format(s, "bo-");
  EXPECT_EQ(s.line, LineStyle::solid);
  EXPECT_EQ(s.marker, Marker::circle);
}

TEST(FormatString, RejectsUnknownAndDuplicateParts) {
  Series s;
  EXPECT_THROW(apply_format(s, "q"), ValueError);
  EXPECT_THROW(apply_format(s, "rg"), ValueError);
  EXPECT_THROW(apply_format(s, "--:"), ValueError);
  std::string msg = message_of<ValueError>([&] { apply_format(s, "z-"); });
  EXPECT_NE(msg.find("\"z-\""), std::string::npos) << msg;
}
