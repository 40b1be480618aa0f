#include "attn/nn/nadaraya_watson.h"

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "attn/optim/optimizer.h"
#include "testing.h"

using namespace attn;
using namespace attn::nn;

TEST(NadarayaWatson, AveragePoolingAndNonparametric) {
  Tensor y = tensor({1.0f, 2.0f, 6.0f});
  EXPECT_EQ(to_vector<float>(nw_average_pooling(y, 2)), (std::vector<float>{3, 3}));
  Tensor x = tensor({0.0f, 1.0f, 2.0f});
  auto r = nw_nonparametric(tensor({1.0f}), x, y);
  EXPECT_EQ(r.attention_weights.shape(), (Shape{1, 3}));
  // Weights exp(-d^2/2) normalized: d = 1, 0, 1.
  double e = std::exp(-0.5), s = 1 + 2 * e;
  EXPECT_NEAR(r.attention_weights.at({0, 0}), e / s, 1e-6);
  EXPECT_NEAR(r.y_hat.at({0}), (1 * e + 2 + 6 * e) / s, 1e-5);
  EXPECT_THROW(nw_nonparametric(tensor({1.0f}), x, tensor({1.0f})), ShapeError);
}

TEST(NadarayaWatson, ParametricGradcheckAndTrainingSharpens) {
  NWKernelRegression net;
  net.to(DType::f64);
  Tensor q = attn::testing::leaf64({4}, 1), k = attn::testing::leaf64({4, 5}, 2),
         v = attn::testing::leaf64({4, 5}, 3);
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& x) { return net.forward(x[0], x[1], x[2]); },
                   {q, k, v, net.w});
}
