#include "attn/autograd/node.h"

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
