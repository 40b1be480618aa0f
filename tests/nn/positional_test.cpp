#include "attn/nn/positional.h"

#include <cmath>

#include "attn/ops/elementwise.h"
#include "testing.h"

using namespace attn;
using namespace attn::nn;

// d2l 10.6 prints P[0, 1:3, :10] (rows 1 and 2).
TEST(PositionalEncoding, GoldenRowsOfTheChapter) {
  PositionalEncoding pe(32, 0.0);
  pe.eval();
  Tensor X = pe.forward(zeros({1, 60, 32}));
  EXPECT_EQ(X.shape(), (Shape{1, 60, 32}));
  std::vector<double> row1 = {.8415, .5403, .5332, .8460, .3110, .9504, .1769, .9842, .0998, .9950};
  std::vector<double> row2 = {.9093, -.4161, .9021, .4315, .5911,
                              .8066, .3482,  .9374, .1987, .9801};
  for (int j = 0; j < 10; ++j) {
    EXPECT_NEAR(X.at({0, 1, j}), row1[j], 5e-5) << "row 1 col " << j;
    EXPECT_NEAR(X.at({0, 2, j}), row2[j], 5e-5) << "row 2 col " << j;
  }
  EXPECT_EQ(X.at({0, 0, 0}), 0.0);
  EXPECT_EQ(X.at({0, 0, 1}), 1.0);
}

TEST(PositionalEncoding, StartOffsetGivesLaterPositions) {
  PositionalEncoding pe(16, 0.0, 50);
  Tensor all = pe.forward(zeros({1, 10, 16}));
  Tensor tail = pe.forward(zeros({1, 3, 16}), 7);
  EXPECT_EQ(to_vector<float>(tail), to_vector<float>(all.narrow(1, 7, 3).contiguous()));
}

TEST(PositionalEncoding, TooLongOrWrongShapeIsAnError) {
  PositionalEncoding pe(8, 0.0, 20);
  try {
    pe.forward(zeros({1, 21, 8}));
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "PositionalEncoding: positions 0..20 exceed max_len 20");
  }
  EXPECT_THROW(pe.forward(zeros({1, 5, 7})), ShapeError);
  EXPECT_THROW(PositionalEncoding(0, 0.0), ValueError);
}

TEST(PositionalEncoding, GradcheckThroughBothEncodings) {
  PositionalEncoding pe(6, 0.0, 10);
  LearnedPositionalEncoding lpe(6, 0.0, 10);
  lpe.to(DType::f64);
  Tensor x = attn::testing::leaf64({2, 5, 6}, 3);
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& v) { return pe.forward(v[0], 2); }, {x});
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& v) { return lpe.forward(v[0], 1); }, {x, lpe.P});
}
