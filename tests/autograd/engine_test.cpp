#include "attn/autograd/node.h"

#include <cmath>

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;

TEST(Autograd, AccumulatesIntoLeavesThroughSharedUses) {
  Tensor x = tensor({1.0f, 2.0f, 3.0f});
  x.requires_grad_();
  Tensor y = sum(x * x + x);  // dy/dx = 2x + 1
  y.backward();
  EXPECT_EQ(to_vector<float>(x.grad()), (std::vector<float>{3, 5, 7}));
  Tensor z = sum(x * 3.0);  // a second backward accumulates
  z.backward();
  EXPECT_EQ(to_vector<float>(x.grad()), (std::vector<float>{6, 8, 10}));
}

// Large gradients (above parallel_grain()) summed into an intermediate's
// slot, in place where the engine made the slot's tensor itself, through
// gradients shared between slots: add's (one tensor handed to both inputs)
// and reshape's (a view). x -> h = 1.5 x -> a = h + h, b = h's reshape,
// c = h r3; dh = 2 r1 + r2 (reshaped back) + r3.
TEST(Autograd, SumsLargeGradientsWithoutWritingThroughSharedOnes) {
  const std::int64_t rows = 300, cols = 200;  // 60,000 elements
  Tensor x = attn::testing::rand32({rows, cols}, 1).requires_grad_();
  Tensor r1 = attn::testing::rand32({rows, cols}, 2), r2 = attn::testing::rand32({cols, rows}, 3),
         r3 = attn::testing::rand32({rows, cols}, 4);
  Tensor h = x * 1.5;
  Tensor a = h + h;
  Tensor b = h.reshape({cols, rows});
  Tensor loss = sum(a * r1) + sum(b * r2) + sum(h * r3);
  loss.backward();
  const auto g = to_vector<float>(x.grad());
  const auto v1 = to_vector<float>(r1), v2 = to_vector<float>(r2.reshape({rows, cols})),
             v3 = to_vector<float>(r3);
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double want = 1.5 * (2.0 * v1[i] + v2[i] + v3[i]);
    ASSERT_NEAR(g[i], want, 1e-5 * (1 + std::fabs(want))) << "element " << i;
  }
  // add's gradient, one tensor handed to both h and w, and another gradient
  // for h, the product h r3 made before or after the addition: w's stays r1.
  for (bool product_first : {true, false}) {
    Tensor y = attn::testing::rand32({rows, cols}, 5).requires_grad_();
    Tensor hy = y * 1.5, wy = y * 2.5;
    Tensor hr = product_first ? hy * r3 : Tensor();
    Tensor sum_add = hy + wy;
    if (!product_first) hr = hy * r3;
    (sum(sum_add * r1) + sum(hr)).backward();
    const auto gy = to_vector<float>(y.grad());
    for (std::size_t i = 0; i < gy.size(); ++i) {
      const double want = 1.5 * (v1[i] + v3[i]) + 2.5 * v1[i];
      ASSERT_NEAR(gy[i], want, 1e-5 * (1 + std::fabs(want)))
          << "element " << i << (product_first ? ", h r3 made first" : ", h + w made first");
    }
  }
  // The inputs and the gradients handed on are untouched.
  EXPECT_TRUE(attn::testing::same_bits(r1, attn::testing::rand32({rows, cols}, 2)));
  EXPECT_TRUE(attn::testing::same_bits(r2, attn::testing::rand32({cols, rows}, 3)));
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = tensor({1.0f});
  x.requires_grad_();
  {
    autograd::NoGradGuard guard;
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_TRUE((x * 2.0).requires_grad());
}

TEST(Autograd, DetachCutsTheGraph) {
  Tensor x = tensor({2.0f});
  x.requires_grad_();
  Tensor y = x.detach() * x;
  y.backward();
  EXPECT_EQ(x.grad().item<float>(), 2.0f);
}

TEST(Autograd, ErrorsAreClear) {
  Tensor x = tensor({1.0f, 2.0f});
  EXPECT_THROW(sum(x).backward(), ValueError);  // does not require grad
  x.requires_grad_();
  Tensor y = x * 2.0;
  EXPECT_THROW(y.backward(), ShapeError);  // not a scalar, no gradient given
  Tensor s = sum(y);
  s.backward();
  EXPECT_THROW(s.backward(), Error);  // graph already used
}

TEST(Autograd, GradcheckCatchesAWrongGradient) {
  // A deliberately wrong backward must fail the check.
  auto wrong = [](const std::vector<Tensor>& v) {
    Tensor out = v[0].detach() * v[0].detach();
    return autograd::record(out, "wrong_square", {v[0]},
                            [](const Tensor& g, const std::vector<bool>&) {
                              return std::vector<Tensor>{g};  // should be 2x * g
                            });
  };
  auto r = autograd::gradcheck(wrong, {attn::testing::leaf64({3}, 1)});
  EXPECT_FALSE(r.ok);
}
