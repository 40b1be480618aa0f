// `attn demo complexity`: its counts checked exactly, its fit on synthetic
// data, and the whole section run at small sizes. Nothing here asserts on a
// time: timings belong to benchmarks.
#include "complexity.h"

#include <cmath>

#include "attn/nn/conv.h"
#include "attn/nn/rnn.h"
#include "attn/ops/attention.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "examples.h"
#include "testing.h"

using namespace attn;
using namespace attn::examples::cnn_rnn_attention;

TEST(FitPowerLaw, RecoversExponentAndCoefficient) {
  std::vector<double> x = {16, 32, 64, 128, 256}, y;
  for (double v : x) y.push_back(3.0 * std::pow(v, 1.5));
  PowerFit f = fit_power_law(x, y);
  EXPECT_NEAR(f.exponent, 1.5, 1e-12);
  EXPECT_NEAR(std::exp(f.log_coeff), 3.0, 1e-10);
  EXPECT_NEAR(f.r2, 1.0, 1e-12);
  EXPECT_NEAR(f(1000.0), 3.0 * std::pow(1000.0, 1.5), 1e-6);
  // A quadratic plus a linear term: the exponent tends to 2 as n grows.
  std::vector<double> n_small = {8, 16, 32}, n_large = {4096, 8192, 16384}, ys, yl;
  for (double n : n_small) ys.push_back(n * n + 100 * n);
  for (double n : n_large) yl.push_back(n * n + 100 * n);
  EXPECT_LT(fit_power_law(n_small, ys).exponent, 1.3);
  EXPECT_NEAR(fit_power_law(n_large, yl).exponent, 2.0, 0.02);
  // Multiplicative noise of +-10% moves the exponent little over a factor 8.
  std::vector<double> noisy = {1.1 * 16, 0.9 * 32, 1.1 * 64, 0.9 * 128};
  EXPECT_NEAR(fit_power_law({16, 32, 64, 128}, noisy).exponent, 1.0, 0.1);
}

TEST(FitPowerLaw, RejectsBadPoints) {
  EXPECT_THROW(fit_power_law({1}, {1}), ValueError);
  EXPECT_THROW(fit_power_law({1, 2}, {1}), ValueError);
  EXPECT_THROW(fit_power_law({1, 2}, {0, 1}), ValueError);
  EXPECT_THROW(fit_power_law({2, 2}, {1, 3}), ValueError);
}

TEST(MaxPathLength, BreadthFirstSearchMatchesClosedForms) {
  for (std::int64_t n = 1; n <= 40; ++n) {
    SCOPED_TRACE(n);
    for (std::int64_t k : {3, 5, 7, 9})
      EXPECT_EQ(max_path_length(Layer::cnn, n, k), max_path_length_formula(Layer::cnn, n, k)) << k;
    EXPECT_EQ(max_path_length(Layer::rnn, n, 3), n);
    EXPECT_EQ(max_path_length(Layer::attention_fused, n, 3), 1);
    EXPECT_EQ(max_path_length(Layer::attention_materialized, n, 3), 1);
  }
  EXPECT_EQ(max_path_length(Layer::cnn, 64, 3), 63);
  EXPECT_EQ(max_path_length(Layer::cnn, 256, 5), 128);
  EXPECT_EQ(max_path_length(Layer::cnn, 256, 9), 64);
  EXPECT_EQ(max_path_length(Layer::rnn, 256, 3), 256);
  // An even kernel spreads k/2 to the right but only k/2 - 1 to the left.
  EXPECT_EQ(max_path_length(Layer::cnn, 9, 4), 8);
  EXPECT_EQ(max_path_length_formula(Layer::rnn, 100, 3), 100);
  EXPECT_THROW(max_path_length_formula(Layer::cnn, 10, 4), ValueError);
}

namespace {

// Which input positions output position i of one real layer depends on:
// those where the gradient of (a random projection of) Y[i] is non-zero.
std::vector<bool> jacobian_row(Layer layer, std::int64_t n, std::int64_t i) {
  const std::int64_t B = 2, d = 3;
  Generator gen(7);
  Tensor X;
  Tensor Yi;
  if (layer == Layer::rnn) {
    nn::GRU gru(d, d, 1, 0.0, DType::f64);
    X = uniform(-1, 1, {n, B, d}, gen, DType::f64);
    X.requires_grad_();
    Yi = gru.forward(X).outputs.select(0, i);
  } else {
    X = uniform(-1, 1, {B, n, d}, gen, DType::f64);
    X.requires_grad_();
    Tensor Y;
    if (layer == Layer::cnn) {
      nn::Conv1d conv(d, d, 3, true, DType::f64);
      Y = conv(X);
    } else {
      Y = layer == Layer::attention_fused
              ? scaled_dot_product_attention(X, X, X)
              : scaled_dot_product_attention_materialized(X, X, X).output;
    }
    Yi = Y.select(1, i);
  }
  sum(mul(Yi, uniform(0.5, 1.5, Yi.shape(), gen, DType::f64))).backward();
  Tensor g = abs(X.grad());
  std::vector<bool> row(n);
  for (std::int64_t j = 0; j < n; ++j)
    row[j] = (layer == Layer::rnn ? sum(g.select(0, j)) : sum(g.select(1, j))).item<double>() > 0;
  return row;
}

}  // namespace

// The dependency structure the search walks is the layers' own: within one
// layer, what position i reaches through `below` and `same_layer` edges is
// exactly where the real layer's gradient is non-zero.
TEST(MaxPathLength, DependenciesMatchTheLayersGradients) {
  const std::int64_t n = 9;
  for (Layer layer :
       {Layer::cnn, Layer::rnn, Layer::attention_fused, Layer::attention_materialized}) {
    SCOPED_TRACE(layer_name(layer));
    for (std::int64_t i = 0; i < n; ++i) {
      std::vector<bool> want(n, false);
      // Positions of this layer that i reaches along the layer, then one step below.
      std::vector<std::int64_t> todo = {i};
      std::vector<bool> seen(n, false);
      seen[i] = true;
      while (!todo.empty()) {
        std::int64_t t = todo.back();
        todo.pop_back();
        Dependencies dep = dependencies(layer, t, n, 3);
        for (std::int64_t s : dep.below) want[s] = true;
        for (std::int64_t s : dep.same_layer)
          if (!seen[s]) {
            seen[s] = true;
            todo.push_back(s);
          }
      }
      EXPECT_EQ(jacobian_row(layer, n, i), want) << "position " << i;
    }
  }
}

TEST(SequentialOps, GraphDepthCountsDependentOps) {
  Tensor x = ones({2, 3});
  x.requires_grad_();
  EXPECT_EQ(graph_depth(x), 0);
  EXPECT_EQ(graph_depth(tanh(exp(x).reshape({3, 2}).transpose(0, 1))), 2);  // views are free
  EXPECT_EQ(graph_depth(add(exp(x), tanh(exp(exp(x))))), 4);
  EXPECT_EQ(graph_depth(ones({2})), 0);
  for (std::int64_t n : {4, 8, 16}) {
    SCOPED_TRACE(n);
    EXPECT_EQ(sequential_ops(Layer::cnn, n, 4, 3), 1);
    EXPECT_EQ(sequential_ops(Layer::attention_fused, n, 4, 3), 1);
    EXPECT_EQ(sequential_ops(Layer::attention_materialized, n, 4, 3), 4);
    EXPECT_EQ(sequential_ops(Layer::rnn, n, 4, 3), 8 * n + 1);
  }
  // Deep graphs do not overflow the stack.
  EXPECT_EQ(sequential_ops(Layer::rnn, 2000, 2, 3), 16001);
}

// Memory is counted, not timed: the materialized path holds (n x n) scores,
// the fused kernel never does.
TEST(Measure, MaterializedAttentionHoldsTheScores) {
  const std::int64_t n = 512, d = 16;
  const std::size_t scores = n * n * sizeof(float);
  Cost fused = measure(Layer::attention_fused, 1, n, d, 3, 1);
  Cost materialized = measure(Layer::attention_materialized, 1, n, d, 3, 1);
  EXPECT_LT(fused.train_bytes, scores / 4);
  EXPECT_GE(materialized.train_bytes, 2 * scores);
  EXPECT_GT(fused.forward_s, 0);
  EXPECT_GT(materialized.train_s, 0);
  for (Layer layer : {Layer::cnn, Layer::rnn}) {
    Cost c = measure(layer, 2, 16, 8, 3, 1);
    EXPECT_GT(c.train_bytes, 0u);
    EXPECT_LT(c.train_bytes, std::size_t(1) << 20);
  }
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 2, 3}), 2.5);
}

class ComplexitySection : public attn::testing::TempDirTest {};

TEST_F(ComplexitySection, RunsSmallAndWritesItsFigures) {
  Plan plan;
  plan.repeats = 1;
  plan.n_values = {16, 32, 64};
  plan.d_for_n = 8;
  plan.d_values = {8, 16};
  plan.n_for_d = 8;
  plan.attention_n_for_d = 16;
  plan.batch_for_n = 2;
  plan.batch_for_d = 3;
  plan.path_n_values = {4, 8, 16};
  plan.sequential_n_values = {4, 8};
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(attn::examples::complexity_with_plan({dir_.string(), 0}, plan), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("O(knd^2)"), std::string::npos) << out;
  EXPECT_NE(out.find("O(n^2 d)"), std::string::npos);
  EXPECT_NE(out.find("n = 16..64 at d = 8"), std::string::npos) << out;
  for (const char* name :
       {"complexity_time_n", "complexity_time_d", "complexity_path_length", "complexity_memory"})
    for (const char* ext : {".png", ".svg"})
      EXPECT_TRUE(std::filesystem::exists(dir_ / (std::string(name) + ext))) << name << ext;
}
