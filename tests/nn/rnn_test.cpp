#include "attn/nn/rnn.h"

#include "attn/ops/elementwise.h"
#include "attn/ops/rnn.h"
#include "testing.h"

using namespace attn;
using namespace attn::nn;
using attn::testing::rand32;

TEST(GruModule, NamesShapesAndState) {
  GRU rnn(5, 7, 3, 0.0);
  auto named = rnn.named_parameters();
  ASSERT_EQ(named.size(), 12u);
  EXPECT_EQ(named[0].first, "weight_ih_l0");
  EXPECT_EQ(named[0].second.shape(), (Shape{21, 5}));
  EXPECT_EQ(named[4].first, "weight_ih_l1");
  EXPECT_EQ(named[4].second.shape(), (Shape{21, 7}));
  EXPECT_EQ(named[11].first, "bias_hh_l2");
  // PyTorch's init: U(-1/sqrt(H), 1/sqrt(H)).
  for (const auto& [name, p] : named)
    EXPECT_LE(max(abs(p.flatten()), 0).item<float>(), 1 / std::sqrt(7.0f) + 1e-6f) << name;
  Tensor X = rand32({4, 2, 5}, 1);
  GRU::Output o = rnn.forward(X);
  EXPECT_EQ(o.outputs.shape(), (Shape{4, 2, 7}));
  EXPECT_EQ(o.state.shape(), (Shape{3, 2, 7}));
  // The last layer's state is its last output.
  EXPECT_EQ(max_abs_diff(o.state.select(0, 2), o.outputs.select(0, 3)), 0.0);
  // Running the layers by hand from zeros gives the same.
  Tensor x = X;
  for (std::int64_t k = 0; k < 3; ++k) {
    const auto& w = rnn.layers[static_cast<std::size_t>(k)];
    x = gru(x, zeros({2, 7}), w[0], w[1], w[2], w[3]);
    EXPECT_EQ(max_abs_diff(o.state.select(0, k), x.select(0, 3)), 0.0) << k;
  }
  EXPECT_THROW(rnn.forward(rand32({4, 2, 6}, 1)), ShapeError);
  EXPECT_THROW(rnn.forward(X, zeros({2, 2, 7})), ShapeError);
  EXPECT_THROW(GRU(0, 3), ValueError);
}

// Dropout acts between layers in training mode only, as nn.GRU's.
TEST(GruModule, DropoutBetweenLayersInTrainingOnly) {
  GRU rnn(3, 4, 2, 0.5);
  Tensor X = rand32({5, 3, 3}, 2);
  rnn.eval();
  GRU::Output a = rnn.forward(X), b = rnn.forward(X);
  EXPECT_EQ(max_abs_diff(a.outputs, b.outputs), 0.0);
  rnn.train();
  GRU::Output c = rnn.forward(X);
  EXPECT_GT(max_abs_diff(a.outputs, c.outputs), 1e-4);
  // The first layer's state has no dropout before it.
  EXPECT_EQ(max_abs_diff(a.state.select(0, 0), c.state.select(0, 0)), 0.0);
}

TEST(GruModule, Gradcheck) {
  GRU rnn(3, 4, 2, 0.0);
  rnn.to(DType::f64);
  Tensor X = attn::testing::leaf64({3, 2, 3}, 5), H0 = attn::testing::leaf64({2, 2, 4}, 6);
  std::vector<Tensor> inputs = rnn.parameters();
  inputs.push_back(X);
  inputs.push_back(H0);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>&) {
        GRU::Output o = rnn.forward(X, H0);
        return cat({o.outputs.reshape({-1}), o.state.reshape({-1})}, 0);
      },
      inputs);
}
