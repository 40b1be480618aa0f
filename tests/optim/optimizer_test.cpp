#include "attn/optim/optimizer.h"

#include <cmath>

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;

TEST(SGD, StepsAgainstTheGradient) {
  Tensor p = tensor({1.0f, -2.0f});
  p.requires_grad_();
  sum(mul(p, p)).backward();  // grad = 2p
  optim::SGD sgd({p}, 0.25);
  sgd.step();
  EXPECT_EQ(to_vector<float>(p), (std::vector<float>{0.5f, -1.0f}));
  sgd.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

// Two Adam steps computed by hand with torch.optim.Adam's formula.
TEST(Adam, MatchesTheReferenceFormula) {
  Tensor p = tensor({0.5f});
  p.requires_grad_();
  optim::Adam adam({p}, 0.1);
  double x = 0.5, m = 0, v = 0;
  for (int t = 1; t <= 2; ++t) {
    p.zero_grad();
    sum(mul(p, p)).backward();
    adam.step();
    double g = 2 * x;
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    x -= 0.1 * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.999, t))) + 1e-8);
    EXPECT_NEAR(p.item<float>(), x, 1e-6);
  }
  EXPECT_THROW(optim::Adam({p}, -1.0), ValueError);
}

TEST(ClipGradNorm, ScalesOnlyAboveTheThreshold) {
  Tensor a = tensor({3.0f}), b = tensor({4.0f});
  a.set_grad(tensor({3.0f}));
  b.set_grad(tensor({4.0f}));
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm({a, b}, 1.0), 5.0);
  EXPECT_NEAR(a.grad().item<float>(), 0.6, 1e-6);
  EXPECT_NEAR(b.grad().item<float>(), 0.8, 1e-6);
  EXPECT_NEAR(optim::clip_grad_norm({a, b}, 10.0), 1.0, 1e-6);
  EXPECT_NEAR(a.grad().item<float>(), 0.6, 1e-6);
}
