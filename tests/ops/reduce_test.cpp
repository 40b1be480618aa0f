#include "attn/ops/reduce.h"

#include <cmath>
#include <string>

#include "attn/ops/elementwise.h"
#include "testing.h"

using namespace attn;
using attn::testing::leaf64;

TEST(Reduce, SumMeanMaxValues) {
  Tensor a = arange(0.0, 24.0, 1.0, DType::f32).reshape({2, 3, 4});
  EXPECT_EQ(sum(a).item<float>(), 276.0f);
  EXPECT_EQ(to_vector<float>(sum(a, {1})), (std::vector<float>{12, 15, 18, 21, 48, 51, 54, 57}));
  EXPECT_EQ(sum(a, {0, 2}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(to_vector<float>(sum(a, {0, 2})), (std::vector<float>{60, 92, 124}));
  EXPECT_EQ(to_vector<float>(mean(a, {-1})), (std::vector<float>{1.5, 5.5, 9.5, 13.5, 17.5, 21.5}));
  EXPECT_EQ(to_vector<float>(max(a, 1)), (std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(to_vector<std::int64_t>(argmax(a, -1)), (std::vector<std::int64_t>{3, 3, 3, 3, 3, 3}));
  EXPECT_THROW(sum(a, {3}), ValueError);
}

TEST(Reduce, Gradcheck) {
  Tensor x = leaf64({3, 4, 5}, 21);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return sum(v[0], {0, 2}); }, {x});
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& v) {
        return sum(v[0].permute({2, 0, 1}), {1}, true);
      },
      {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return mean(v[0], {-1}); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return sum(v[0]); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return max(v[0], 1); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return max(v[0].transpose(0, 2), 0, true); },
                   {x});
}

TEST(Reduce, SumToInvertsBroadcast) {
  Tensor g = ones({2, 3, 4});
  EXPECT_EQ(to_vector<float>(sum_to(g, {3, 1})), (std::vector<float>{8, 8, 8}));
  EXPECT_EQ(to_vector<float>(sum_to(g, {4})), (std::vector<float>{6, 6, 6, 6}));
  EXPECT_THROW(sum_to(g, {5}), ShapeError);
}

TEST(Reduce, PrefixReductionMatchesPermutedPath) {
  Tensor x = attn::testing::rand32({257, 129}, 5);
  Tensor fast = sum(x, {0});
  Tensor slow = sum(x.transpose(0, 1), {1});
  EXPECT_LT(max_abs_diff(fast, slow), 1e-4);
}

// Rows lying further apart than their length (a padded layout: linear.cpp's
// masked gradient) are added in the contiguous rows' order: the same bits.
TEST(Reduce, SumOverSpacedRowsHasTheContiguousBits) {
  for (std::int64_t pad : {1, 16}) {
    Tensor wide = attn::testing::rand32({257, 129 + pad}, 6);
    Tensor spaced = wide.narrow(1, 0, 129);
    ASSERT_FALSE(spaced.is_contiguous());
    EXPECT_TRUE(attn::testing::same_bits(sum(spaced, {0}), sum(spaced.contiguous(), {0})))
        << "pad " << pad;
    EXPECT_TRUE(attn::testing::same_bits(sum_to(spaced, {129}), sum(spaced.contiguous(), {0})));
  }
}

TEST(MaxAbsDiff, LargestElementwiseDifferenceAcrossDtypesAndLayouts) {
  Tensor a = from_vector(std::vector<double>{1, -2, 3.5, 0}, {2, 2});
  Tensor b = from_vector(std::vector<float>{1, 2, 3, 0}, {2, 2});
  EXPECT_EQ(max_abs_diff(a, b), 4.0);
  EXPECT_EQ(max_abs_diff(b, a), 4.0);
  EXPECT_EQ(max_abs_diff(a, a), 0.0);
  // Any layout: a transposed view against its contiguous copy; integers too.
  Tensor x = arange(0.0, 12.0, 1.0, DType::f32).reshape({3, 4}).transpose(0, 1);
  EXPECT_EQ(max_abs_diff(x, x.contiguous()), 0.0);
  EXPECT_EQ(max_abs_diff(arange(5), arange(0.0, 5.0, 1.0, DType::f64)), 0.0);
  EXPECT_EQ(max_abs_diff(arange(5), full({5}, 2.0, DType::i64)), 2.0);
}

TEST(MaxAbsDiff, NaNIsNeverSmallAndEqualInfinitiesAreEqual) {
  Tensor ok = tensor({1, 2, 3});
  EXPECT_TRUE(std::isnan(max_abs_diff(tensor({1, NAN, 3}), ok)));
  EXPECT_TRUE(std::isnan(max_abs_diff(ok, tensor({1, 2, NAN}))));
  EXPECT_TRUE(std::isnan(max_abs_diff(tensor({NAN}), tensor({NAN}))));
  EXPECT_EQ(max_abs_diff(tensor({INFINITY, -INFINITY}), tensor({INFINITY, -INFINITY})), 0.0);
  EXPECT_EQ(max_abs_diff(tensor({INFINITY}), tensor({1})), INFINITY);
  EXPECT_EQ(max_abs_diff(tensor({INFINITY}), tensor({-INFINITY})), INFINITY);
}

TEST(MaxAbsDiff, ShapesMustMatch) {
  std::string msg;
  try {
    max_abs_diff(zeros({2, 3}), zeros({3, 2}));  // same count, other shape
  } catch (const ShapeError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("max_abs_diff"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3, 2]"), std::string::npos) << msg;
  EXPECT_THROW(max_abs_diff(zeros({3}), zeros({1, 3})), ShapeError);
  EXPECT_THROW(max_abs_diff(Tensor(), zeros({3})), ValueError);
}
