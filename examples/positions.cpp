// d2l 10.6 Self-Attention and Positional Encoding, made measurable:
//
// 1. Self-attention is permutation-equivariant: f(X[pi]) = f(X)[pi] for every
//    permutation pi of the tokens, because every token attends to the set of
//    the others with weights that depend only on contents. Adding positions
//    (sinusoidal or a learned embedding) to X breaks it: that is all the model
//    knows about order.
// 2. The relative-position property of the sinusoidal encoding: for every
//    offset d, one 2x2 rotation R(d w_j), the same for every position i, maps
//    (p[i, 2j], p[i, 2j+1]) to (p[i+d, 2j], p[i+d, 2j+1]).
// 3. The chapter's exercise on stacking self-attention layers: over depth,
//    pure attention averages the tokens into one vector (rank collapse, ref:
//    Dong, Cordonnier, Loukas, "Attention is not all you need: pure attention
//    loses rank doubly exponentially with depth", ICML 2021, arXiv 2103.03404);
//    residual connections keep the tokens apart.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <vector>

#include "attn/attn.h"
#include "attn/nn/attention.h"
#include "attn/nn/positional.h"
#include "attn/viz/line_plot.h"
#include "examples.h"

namespace attn::examples {
namespace {

// A uniformly random permutation of 0..n-1 (Fisher-Yates on Philox uniforms).
std::vector<std::int64_t> random_permutation(std::int64_t n, Generator& gen) {
  std::vector<std::int64_t> pi(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) pi[static_cast<std::size_t>(i)] = i;
  Tensor u = rand({n}, gen);
  const float* up = u.data<float>();
  for (std::int64_t i = n - 1; i > 0; --i) {
    auto j = std::min(i, static_cast<std::int64_t>(up[i] * static_cast<float>(i + 1)));
    std::swap(pi[static_cast<std::size_t>(i)], pi[static_cast<std::size_t>(j)]);
  }
  return pi;
}

// ---- 1. Permutation equivariance ----

struct EquivarianceResult {
  double output = 0;  // max |f(X[pi]) - f(X)[pi]| over the trials
  double weights = 0;  // max |A(X[pi]) - A(X)[pi, pi]| (materialized path only)
};

// positions: (1, T, d) added to the tokens (undefined: none). The positions
// stay where they are while the tokens move: X[pi] + P, not (X + P)[pi].
EquivarianceResult check_equivariance(nn::MultiHeadAttention& attention, const Tensor& X,
                                      const Tensor& positions, int trials, bool materialized,
                                      std::uint64_t seed) {
  auto with_positions = [&](const Tensor& t) { return positions.defined() ? t + positions : t; };
  std::optional<nn::KeepAttentionWeights> keep;
  if (materialized) keep.emplace();
  Generator gen(seed);
  const std::int64_t T = X.size(1);
  Tensor Xp = with_positions(X);
  Tensor Y = attention.forward(Xp, Xp, Xp);
  Tensor A = materialized ? attention.attention_weights() : Tensor();
  EquivarianceResult r;
  for (int t = 0; t < trials; ++t) {
    Tensor pi = from_vector(random_permutation(T, gen));
    Tensor Xpi = with_positions(index_select(X, 1, pi));
    Tensor Ypi = attention.forward(Xpi, Xpi, Xpi);
    r.output = std::max(r.output, max_abs_diff(Ypi, index_select(Y, 1, pi)));
    if (materialized) {
      Tensor A_expected = index_select(index_select(A, 1, pi), 2, pi);
      r.weights = std::max(r.weights, max_abs_diff(attention.attention_weights(), A_expected));
    }
  }
  return r;
}

void permutation_equivariance(std::uint64_t seed) {
  const std::int64_t batch_size = 2, num_steps = 10, num_hiddens = 64, num_heads = 4;
  const int trials = 8;
  manual_seed(seed);
  nn::MultiHeadAttention attention(num_hiddens, num_hiddens, num_hiddens, num_hiddens, num_heads,
                                   0.1);
  attention.eval();  // no dropout
  nn::PositionalEncoding sinusoidal(num_hiddens, 0);
  nn::Embedding learned(num_steps, num_hiddens);  // position i -> row i, N(0, 1) as PyTorch
  autograd::NoGradGuard no_grad;
  Tensor X = randn({batch_size, num_steps, num_hiddens});
  Tensor P_sin = sinusoidal.P.narrow(1, 0, num_steps);
  Tensor P_learned = learned.forward(arange(num_steps)).unsqueeze(0);

  fmt::print("1. Permutation equivariance of self-attention\n\n");
  fmt::print(
      "MultiHeadAttention({0}, {0}, {0}, {0}, num_heads={1}) as self-attention, eval mode;\n"
      "X: {2} tokens of N(0, 1), batch {3}; {4} random permutations pi of the tokens.\n"
      "max |f(X[pi] + P) - f(X + P)[pi]| over the permutations (f32):\n\n",
      num_hiddens, num_heads, num_steps, batch_size, trials);
  fmt::print("{:<40} {:>12} {:>12}\n", "positions P added to the tokens", "fused", "materialized");
  struct Case {
    const char* name;
    Tensor P;
    bool equivariant;
  };
  const Case cases[] = {
      {"none", Tensor(), true},
      {"sinusoidal (nn::PositionalEncoding)", P_sin, false},
      {"learned (nn::Embedding over positions)", P_learned, false},
  };
  double weights_diff = 0;
  for (const Case& c : cases) {
    EquivarianceResult fused = check_equivariance(attention, X, c.P, trials, false, seed + 1);
    EquivarianceResult mat = check_equivariance(attention, X, c.P, trials, true, seed + 1);
    bool holds = fused.output < 1e-5 && mat.output < 1e-5;
    fmt::print("{:<40} {:>12.2e} {:>12.2e}   {}\n", c.name, fused.output, mat.output,
               holds ? "equivariant" : "not equivariant");
    if (c.equivariant) {
      weights_diff = mat.weights;
      ATTN_CHECK(holds, InternalError,
                 "demo positions: self-attention without positions is not permutation-equivariant "
                 "(max difference {:.3g} fused, {:.3g} materialized; expected < 1e-5)",
                 fused.output, mat.output);
    } else {
      // Clearly not: the difference is of the size of the outputs themselves.
      ATTN_CHECK(fused.output > 1e-2 && mat.output > 1e-2, InternalError,
                 "demo positions: with {} positions the outputs still permute with the inputs "
                 "(max difference {:.3g} fused, {:.3g} materialized; expected > 1e-2)",
                 c.name, fused.output, mat.output);
    }
  }
  fmt::print(
      "\nwithout positions, the attention weights permute too: max |A(X[pi]) - A(X)[pi, pi]| = "
      "{:.2e}\n",
      weights_diff);
  ATTN_CHECK(weights_diff < 1e-5, InternalError,
             "demo positions: the attention weights do not permute with the tokens ({:.3g})",
             weights_diff);
  fmt::print(
      "The positions stay in place while the tokens move, so with them each token sees a\n"
      "different position and the outputs change: order is all the encoding adds.\n\n");
}

// ---- 2. Relative positions ----

void relative_positions() {
  const std::int64_t encoding_dim = 32, num_positions = 1000, max_offset = 50;
  nn::PositionalEncoding pos_encoding(encoding_dim, 0, num_positions);
  Tensor P = pos_encoding.P.select(0, 0).contiguous();
  const float* p32 = P.data<float>();
  // The same table in f64, to tell the rotation's error from P's f32 rounding.
  std::vector<double> p64(static_cast<std::size_t>(num_positions * encoding_dim));
  std::vector<double> w(static_cast<std::size_t>(encoding_dim / 2));
  for (std::int64_t j = 0; j < encoding_dim / 2; ++j)
    w[static_cast<std::size_t>(j)] = 1.0 / std::pow(10000.0, 2.0 * j / encoding_dim);
  for (std::int64_t i = 0; i < num_positions; ++i)
    for (std::int64_t j = 0; j < encoding_dim / 2; ++j) {
      double x = static_cast<double>(i) * w[static_cast<std::size_t>(j)];
      p64[static_cast<std::size_t>(i * encoding_dim + 2 * j)] = std::sin(x);
      p64[static_cast<std::size_t>(i * encoding_dim + 2 * j + 1)] = std::cos(x);
    }

  // max over i, j of |R(d w_j) (p[i, 2j], p[i, 2j+1]) - (p[i+d, 2j], p[i+d, 2j+1])|
  auto rotation_error = [&](auto&& p, std::int64_t delta, std::int64_t first, std::int64_t last) {
    double worst = 0;
    for (std::int64_t j = 0; j < encoding_dim / 2; ++j) {
      double c = std::cos(delta * w[static_cast<std::size_t>(j)]);
      double s = std::sin(delta * w[static_cast<std::size_t>(j)]);
      for (std::int64_t i = first; i + delta < last; ++i) {
        double a = p(i, 2 * j), b = p(i, 2 * j + 1);
        worst = std::max({worst, std::fabs(c * a + s * b - p(i + delta, 2 * j)),
                          std::fabs(-s * a + c * b - p(i + delta, 2 * j + 1))});
      }
    }
    return worst;
  };
  auto at32 = [&](std::int64_t i, std::int64_t k) {
    return static_cast<double>(p32[i * encoding_dim + k]);
  };
  auto at64 = [&](std::int64_t i, std::int64_t k) {
    return p64[static_cast<std::size_t>(i * encoding_dim + k)];
  };

  fmt::print("2. Relative positions: p[i+d] = R(d w_j) p[i] for each pair (2j, 2j+1)\n\n");
  fmt::print(
      "PositionalEncoding({}) over {} positions; R(t) = [[cos t, sin t], [-sin t, cos t]],\n"
      "w_j = 1 / 10000^(2j/{}); every offset d in 1..{}, every position i with i + d < {},\n"
      "every pair j in 0..{}. Max error |R(d w_j) p[i] - p[i+d]|:\n\n",
      encoding_dim, num_positions, encoding_dim, max_offset, num_positions, encoding_dim / 2 - 1);
  fmt::print("{:>12} {:>16} {:>16} {:>16}\n", "offsets d", "P f32, i < 60", "P f32, all i",
             "P f64, all i");
  double worst32 = 0, worst64 = 0;
  const std::int64_t groups[][2] = {{1, 1}, {2, 5}, {6, 10}, {11, 20}, {21, 50}};
  for (const auto& g : groups) {
    double e_short = 0, e32 = 0, e64 = 0;
    for (std::int64_t d = g[0]; d <= g[1] && d <= max_offset; ++d) {
      e_short = std::max(e_short, rotation_error(at32, d, 0, 60));
      e32 = std::max(e32, rotation_error(at32, d, 0, num_positions));
      e64 = std::max(e64, rotation_error(at64, d, 0, num_positions));
    }
    std::string name = g[0] == g[1] ? fmt::format("{}", g[0]) : fmt::format("{}-{}", g[0], g[1]);
    fmt::print("{:>12} {:>16.2e} {:>16.2e} {:>16.2e}\n", name, e_short, e32, e64);
    worst32 = std::max(worst32, e32);
    worst64 = std::max(worst64, e64);
  }
  fmt::print("\nmax rotation error over all {} offsets: {:.2e} (f32 P), {:.2e} (f64 P)\n",
             max_offset, worst32, worst64);
  fmt::print(
      "The rotation depends on d only, not on i: the residual is P's f32 rounding, which\n"
      "grows with the position (the angle i w_j carries a relative error of 2^-24).\n\n");
  ATTN_CHECK(worst32 < 1e-3 && worst64 < 1e-9, InternalError,
             "demo positions: the rotation property fails (max error {:.3g} in f32, {:.3g} in "
             "f64; expected < 1e-3 and < 1e-9)",
             worst32, worst64);
}

// ---- 3. Stacking self-attention layers ----

// Mean cosine similarity over the pairs of distinct tokens, and the relative
// distance of the tokens to their mean ||X - 1 mean(X)||_F / ||X||_F (0: all
// tokens one vector, rank 1), each averaged over the batch.
struct Alike {
  double cosine = 0, residual = 0;
};

Alike how_alike(const Tensor& X) {
  Tensor Xc = X.contiguous();
  const float* x = Xc.data<float>();
  const std::int64_t B = X.size(0), T = X.size(1), d = X.size(2);
  Alike r;
  for (std::int64_t b = 0; b < B; ++b) {
    const float* xb = x + b * T * d;
    std::vector<double> norm(static_cast<std::size_t>(T)), mean(static_cast<std::size_t>(d));
    double total = 0, centered = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      double s = 0;
      for (std::int64_t k = 0; k < d; ++k) {
        s += double{xb[t * d + k]} * xb[t * d + k];
        mean[static_cast<std::size_t>(k)] += xb[t * d + k] / static_cast<double>(T);
      }
      norm[static_cast<std::size_t>(t)] = std::sqrt(s);
      total += s;
    }
    double cos_sum = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t k = 0; k < d; ++k) {
        double c = xb[t * d + k] - mean[static_cast<std::size_t>(k)];
        centered += c * c;
      }
      for (std::int64_t u = t + 1; u < T; ++u) {
        double dot = 0;
        for (std::int64_t k = 0; k < d; ++k) dot += double{xb[t * d + k]} * xb[u * d + k];
        cos_sum +=
            dot /
            std::max(norm[static_cast<std::size_t>(t)] * norm[static_cast<std::size_t>(u)], 1e-300);
      }
    }
    r.cosine += cos_sum / (static_cast<double>(T * (T - 1)) / 2) / static_cast<double>(B);
    r.residual += std::sqrt(centered / std::max(total, 1e-300)) / static_cast<double>(B);
  }
  return r;
}

// The four ways of wiring a stack of self-attention layers, with and
// without positions added to the input.
enum class Wiring { attention, attention_norm, residual, residual_norm };
struct StackConfig {
  const char* name;  // column header
  const char* label;  // legend
  Wiring wiring;
  bool positions;
  const char* fmt;
};
const StackConfig kStackConfigs[] = {
    {"attn", "attn(X)", Wiring::attention, false, "bo-"},
    {"attn+PE", "attn(X), PE", Wiring::attention, true, "bo--"},
    {"LN(attn)", "LN(attn(X))", Wiring::attention_norm, false, "m+-"},
    {"LN(attn)+PE", "LN(attn(X)), PE", Wiring::attention_norm, true, "m+--"},
    {"res", "X + attn(X)", Wiring::residual, false, "g-"},
    {"res+PE", "X + attn(X), PE", Wiring::residual, true, "g--"},
    {"LN(res)", "LN(X + attn(X))", Wiring::residual_norm, false, "r-"},
    {"LN(res)+PE", "LN(X + attn(X)), PE", Wiring::residual_norm, true, "r--"},
};
constexpr int kStackDepth = 24;
constexpr std::int64_t kStackHiddens = 64, kStackHeads = 4, kStackSteps = 16, kStackBatch = 8;
using Curves = std::vector<std::vector<Alike>>;

// How alike the tokens are after each layer, for every wiring.
Curves stack_curves(const std::vector<std::shared_ptr<nn::MultiHeadAttention>>& layers,
                    const std::vector<std::shared_ptr<nn::LayerNorm>>& norms,
                    nn::PositionalEncoding& pos_encoding, const Tensor& X0) {
  const std::size_t num_configs = std::size(kStackConfigs);
  std::vector<std::vector<Alike>> curves(num_configs);
  for (std::size_t c = 0; c < num_configs; ++c) {
    const StackConfig& cfg = kStackConfigs[c];
    Tensor X = cfg.positions ? pos_encoding.forward(X0) : X0;
    curves[c].push_back(how_alike(X));
    for (int l = 0; l < kStackDepth; ++l) {
      Tensor A = layers[static_cast<std::size_t>(l)]->forward(X, X, X);
      const nn::LayerNorm& norm = *norms[static_cast<std::size_t>(l)];
      switch (cfg.wiring) {
        case Wiring::attention: X = A; break;
        case Wiring::attention_norm: X = norm.forward(A); break;
        case Wiring::residual: X = X + A; break;
        case Wiring::residual_norm: X = norm.forward(X + A); break;
      }
      curves[c].push_back(how_alike(X));
    }
  }

  return curves;
}

// The tables of both measures at some depths.
void print_stack_tables(const Curves& curves) {
  const std::int64_t batch_size = kStackBatch, num_steps = kStackSteps, num_hiddens = kStackHiddens,
                     num_heads = kStackHeads;
  const int depth = kStackDepth;
  const std::size_t num_configs = std::size(kStackConfigs);
  fmt::print("3. Stacking self-attention layers: how fast the tokens become alike\n\n");
  fmt::print(
      "{} randomly initialized MultiHeadAttention({}, num_heads={}) layers (PyTorch's default\n"
      "init, eval mode), {} tokens of N(0, 1), batch {}; PE: the sinusoidal encoding added to the\n"
      "input once, as the Transformer does; LN: LayerNorm({}) (post-norm, the Transformer's\n"
      "AddNorm when with the residual). Each layer maps X to:\n",
      depth, num_hiddens, num_heads, num_steps, batch_size, num_hiddens);
  for (const StackConfig& cfg : kStackConfigs) fmt::print("  {:<12} {}\n", cfg.name, cfg.label);
  const int shown[] = {0, 1, 2, 3, 4, 6, 8, 12, 16, 20, 24};
  auto table = [&](const char* title, double Alike::*field, const char* spec) {
    fmt::print("\n{}\n{:>5}", title, "depth");
    for (const StackConfig& cfg : kStackConfigs) fmt::print(" {:>11}", cfg.name);
    fmt::print("\n");
    for (int l : shown) {
      fmt::print("{:>5}", l);
      for (std::size_t c = 0; c < num_configs; ++c)
        fmt::print(" {:>11}",
                   fmt::format(fmt::runtime(spec), curves[c][static_cast<std::size_t>(l)].*field));
      fmt::print("\n");
    }
  };
  table("mean pairwise cosine similarity of the tokens (1: all alike)", &Alike::cosine, "{:.4f}");
  table("relative distance to the mean token ||X - mean(X)|| / ||X|| (0: rank 1)", &Alike::residual,
        "{:.2e}");
}

// Both measures against depth, one curve per wiring.
void plot_stacks(const Options& o, const Curves& curves) {
  const int depth = kStackDepth;
  const std::size_t num_configs = std::size(kStackConfigs);
  const auto& configs = kStackConfigs;
  std::vector<double> depths;
  for (int l = 0; l <= depth; ++l) depths.push_back(l);
  auto plot = [&](const std::string& name, const std::string& title, const std::string& ylabel,
                  double Alike::*field, bool log_y) {
    viz::LinePlot fig({.title = title,
                       .xlabel = "Depth (self-attention layers)",
                       .ylabel = ylabel,
                       .xmin = 0,
                       .xmax = depth,
                       .log_y = log_y,
                       .width = 440,
                       .height = 340});
    for (std::size_t c = 0; c < num_configs; ++c) {
      std::vector<double> y;
      // A log axis cannot show 0: floor at 1e-9, below f32's resolution.
      for (const Alike& a : curves[c]) y.push_back(log_y ? std::max(a.*field, 1e-9) : a.*field);
      // One legend entry per wiring; the dashed twin (with PE) has its own entry below.
      fig.plot(configs[c].positions ? "" : configs[c].label, depths, y, configs[c].fmt);
    }
    // A single point draws no line: the legend's key for the dashed curves.
    fig.plot("dashed: with PE", {0.0}, {curves[0][0].*field}, "k--");
    std::string path = figure_path(o, name);
    fig.save(path);
    return path;
  };
  std::string cos_path = plot("positions_depth_cosine", "Tokens becoming alike over depth",
                              "Mean pairwise cosine similarity", &Alike::cosine, false);
  std::string res_path = plot("positions_depth_rank", "Rank collapse over depth",
                              "||X - mean token|| / ||X||", &Alike::residual, true);
  fmt::print("\nplots: {}.png, {}.png (there a distance of 0 is drawn at 1e-9)\n", cos_path,
             res_path);
}

void stacked_layers(const Options& o) {
  const std::int64_t num_steps = kStackSteps, num_hiddens = kStackHiddens, num_heads = kStackHeads;
  const int depth = kStackDepth;
  manual_seed(o.seed + 3);
  // One stack of randomly initialized layers (PyTorch's default init, as d2l),
  // wired in four ways below, so that every curve sees the same weights.
  std::vector<std::shared_ptr<nn::MultiHeadAttention>> layers;
  std::vector<std::shared_ptr<nn::LayerNorm>> norms;
  for (int l = 0; l < depth; ++l) {
    layers.push_back(std::make_shared<nn::MultiHeadAttention>(num_hiddens, num_hiddens, num_hiddens,
                                                              num_hiddens, num_heads, 0.0));
    layers.back()->eval();
    norms.push_back(std::make_shared<nn::LayerNorm>(num_hiddens));
  }
  nn::PositionalEncoding pos_encoding(num_hiddens, 0);
  autograd::NoGradGuard no_grad;
  Tensor X0 = randn({kStackBatch, num_steps, num_hiddens});
  const Curves curves = stack_curves(layers, norms, pos_encoding, X0);
  print_stack_tables(curves);
  // Why so fast: at PyTorch's default init the scores q.k / sqrt(d) are small,
  // the softmax is nearly uniform and each layer nearly averages the tokens.
  double largest = 0;
  {
    nn::KeepAttentionWeights keep;
    layers[0]->forward(X0, X0, X0);
    Tensor w = layers[0]->attention_weights();
    largest = mean(max(w, 2)).item<double>();
  }
  fmt::print(
      "\nWhy pure attention collapses this fast: at this init the first layer's weights are "
      "nearly\nuniform (largest weight of a row {:.3f} on average; uniform: 1/{} = {:.3f}), so a "
      "layer\nnearly averages the tokens.\n",
      largest, num_steps, 1.0 / static_cast<double>(num_steps));

  auto final_of = [&](std::size_t c) { return curves[c].back(); };
  fmt::print(
      "\nAt depth {}: pure attention has made the tokens one vector (cosine {:.4f}, distance "
      "{:.1e};\nwith LayerNorm {:.4f}, {:.1e}); with the residual they stay apart (cosine "
      "{:.4f}, with LayerNorm {:.4f}).\n",
      depth, final_of(0).cosine, final_of(0).residual, final_of(2).cosine, final_of(2).residual,
      final_of(4).cosine, final_of(6).cosine);

  plot_stacks(o, curves);
}

}  // namespace

int positions(const Options& o) {
  permutation_equivariance(o.seed);
  relative_positions();
  relative_schemes(o);
  stacked_layers(o);
  return 0;
}

}  // namespace attn::examples

#ifdef ATTN_EXAMPLE_MAIN
int main(int argc, char** argv) {
  return attn::examples::run_main(argc, argv, attn::examples::positions);
}
#endif
