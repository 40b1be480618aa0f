#include "attn/nn/conv.h"

#include <cmath>

#include "attn/ops/conv.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;
using attn::testing::leaf64;

namespace {
using Inputs = std::vector<Tensor>;
}  // namespace

TEST(Conv1dModule, NamesShapesInitAndGradcheck) {
  manual_seed(3);
  nn::Conv1d conv(4, 6, 3);
  auto names = conv.named_parameters();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].first, "weight");
  EXPECT_EQ(names[1].first, "bias");
  EXPECT_EQ(conv.weight.shape(), (Shape{6, 4, 3}));
  EXPECT_EQ(conv.bias.shape(), (Shape{6}));
  const double bound = 1.0 / std::sqrt(12.0);
  for (const Tensor& p : {conv.weight, conv.bias})
    for (float v : to_vector<float>(p)) EXPECT_LE(std::fabs(v), bound);
  EXPECT_GT(max_abs_diff(conv.weight, zeros_like(conv.weight)), bound / 2);  // not all zero
  EXPECT_EQ(conv(zeros({2, 7, 4})).shape(), (Shape{2, 7, 6}));
  EXPECT_THROW(conv(zeros({2, 7, 5})), ShapeError);
  EXPECT_THROW(nn::Conv1d(4, 6, 0), ValueError);
  EXPECT_FALSE(nn::Conv1d(2, 2, 3, false).bias.defined());

  conv.to(DType::f64);
  Tensor X = leaf64({2, 5, 4}, 100);
  EXPECT_GRADCHECK([&conv](const Inputs& v) { return conv(v[0]); }, (Inputs{X}));
  EXPECT_GRADCHECK([&conv, X](const Inputs& v) { return conv1d(X.detach(), v[0], v[1]); },
                   (Inputs{conv.weight, conv.bias}));
}
