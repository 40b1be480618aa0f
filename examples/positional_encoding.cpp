// d2l 10.6.3 Positional Encoding: sinusoids of decreasing frequency along the
// encoding dimension, and the relative-position property: for a fixed offset
// d, a 2x2 rotation maps the pair (p[i, 2j], p[i, 2j+1]) to (p[i+d, 2j], p[i+d, 2j+1]).
#include <fmt/format.h>

#include <bitset>
#include <cmath>

#include "attn/attn.h"
#include "attn/nn/positional.h"
#include "attn/viz/heatmap.h"
#include "attn/viz/line_plot.h"
#include "examples.h"

namespace attn::examples {

int positional_encoding(const Options& o) {
  const std::int64_t encoding_dim = 32, num_steps = 60;
  nn::PositionalEncoding pos_encoding(encoding_dim, 0);
  pos_encoding.eval();
  Tensor X = pos_encoding.forward(zeros({1, num_steps, encoding_dim}));
  Tensor P = pos_encoding.P.narrow(1, 0, num_steps);
  fmt::print("P[0, 1:3, :10] =\n{}\n\n", P.select(0, 0).narrow(0, 1, 2).narrow(1, 0, 10).str());

  viz::LinePlot plot({.xlabel = "Row (position)", .width = 430, .height = 190});
  const char* fmts[] = {"-", "m--", "g-.", "r:"};
  Tensor positions = arange(0.0, static_cast<double>(num_steps), 1.0, DType::f32);
  for (std::int64_t j = 6; j < 10; ++j)
    plot.plot(fmt::format("Col {}", j), positions, P.select(0, 0).select(1, j), fmts[j - 6]);
  std::string path = figure_path(o, "positional_encoding_columns");
  plot.save(path);
  fmt::print("plot of columns 6-9: {}.png\n\n", path);

  for (int i = 0; i < 8; ++i) fmt::print("{} in binary is {}\n", i, std::bitset<3>(i).to_string());
  fmt::print("\n");

  std::string heat = figure_path(o, "positional_encoding_heatmap");
  viz::Heatmaps(P.unsqueeze(0), {.xlabel = "Column (encoding dimension)",
                                 .ylabel = "Row (position)",
                                 .cmap = viz::Colormap::blues})
      .save(heat);
  fmt::print("heatmap of P (60 x 32): {}.png\n\n", heat);

  // Relative positions: p_(i+d) = R(d w_j) p_i for each pair of columns.
  const float* p = P.contiguous().data<float>();
  for (std::int64_t delta : {1, 5, 10}) {
    double worst = 0;
    for (std::int64_t i = 0; i + delta < num_steps; ++i)
      for (std::int64_t j = 0; j < encoding_dim / 2; ++j) {
        double w = 1.0 / std::pow(10000.0, 2.0 * j / encoding_dim);
        double c = std::cos(delta * w), s = std::sin(delta * w);
        double a = p[i * encoding_dim + 2 * j], b = p[i * encoding_dim + 2 * j + 1];
        double a2 = c * a + s * b, b2 = -s * a + c * b;
        worst = std::max({worst, std::fabs(a2 - p[(i + delta) * encoding_dim + 2 * j]),
                          std::fabs(b2 - p[(i + delta) * encoding_dim + 2 * j + 1])});
      }
    fmt::print("offset {:2}: max |R(d w) p_i - p_(i+d)| over all i, j = {:.2e}\n", delta, worst);
    ATTN_CHECK(worst < 1e-4, InternalError, "positional-encoding: the rotation check failed ({})",
               worst);
  }
  (void)X;
  return 0;
}

}  // namespace attn::examples

#ifdef ATTN_EXAMPLE_MAIN
int main(int argc, char** argv) {
  return attn::examples::run_main(argc, argv, attn::examples::positional_encoding);
}
#endif
