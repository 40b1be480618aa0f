#include "attn/ops/softmax.h"

#include <cmath>

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "kernels/vec/vec_math.h"
#include "testing.h"

using namespace attn;
using attn::testing::leaf64;
using attn::testing::rand32;

namespace {
using Fn = autograd::Function;
using Inputs = std::vector<Tensor>;
}  // namespace

TEST(Softmax, KnownValuesOverLastDim) {
  Tensor x = from_vector<float>({1, 2, 3, 0, 0, 0}, {2, 3});
  auto y = to_vector<float>(softmax(x));
  const float e = std::exp(1.0f), s = 1 + e + e * e;
  std::vector<float> want = {1 / s, e / s, e * e / s, 1.f / 3, 1.f / 3, 1.f / 3};
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-6) << i;
  auto ly = to_vector<float>(log_softmax(x));
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(ly[i], std::log(want[i]), 1e-6) << i;
}

TEST(Softmax, LargeInputsDoNotOverflow) {
  Tensor x = from_vector<float>({1000, 1001, 1002, -1000, -1001, -1002}, {2, 3});
  Tensor y = softmax(x);
  EXPECT_FALSE(has_nonfinite(y));
  EXPECT_LT(max_abs_diff(y.select(0, 0), softmax(from_vector<float>({0, 1, 2}))), 1e-6);
  EXPECT_FALSE(has_nonfinite(log_softmax(x)));
}

// d2l masks with -1e6: a fully masked row is uniform, never NaN, and its
// gradient is finite too.
TEST(Softmax, FullyMaskedRowIsUniformForwardAndBackward) {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = full({2, 5}, -1e6, dt);
    fill_(x.select(0, 1).narrow(0, 0, 2), 0.5);  // row 1: two valid, three masked
    x.requires_grad_();
    Tensor y = softmax(x);
    auto v = to_vector<double>(y);
    for (int j = 0; j < 5; ++j) EXPECT_NEAR(v[j], 0.2, 1e-6);
    EXPECT_NEAR(v[5], 0.5, 1e-6);
    EXPECT_NEAR(v[6], 0.5, 1e-6);
    for (int j = 7; j < 10; ++j) EXPECT_EQ(v[j], 0.0);
    sum(mul(y, arange(0.0, 10.0, 1.0, dt).reshape({2, 5}))).backward();
    EXPECT_FALSE(has_nonfinite(x.grad()));
    Tensor ly = log_softmax(x.detach());
    EXPECT_FALSE(has_nonfinite(ly));
    EXPECT_NEAR(ly.at({0, 0}), std::log(0.2), 1e-6);
  }
}

TEST(Softmax, FastMatchesReferenceOnOddSizes) {
  const std::vector<Shape> shapes = {{1},        {7},       {3, 1},    {5, 17},
                                     {3, 7, 33}, {9, 1001}, {67, 513}, {2, 3, 5, 7}};
  for (const auto& shape : shapes) {
    SCOPED_TRACE(shape_str(shape));
    Tensor x32 = rand32(shape, 3, -8.0, 8.0);
    EXPECT_LT(max_abs_diff(softmax(x32), softmax_reference(x32)), 2e-7);
    EXPECT_LT(max_abs_diff(log_softmax(x32), log_softmax_reference(x32)), 4e-6);
    Tensor x64 = x32.to(DType::f64);
    EXPECT_LT(max_abs_diff(softmax(x64), softmax_reference(x64)), 1e-15);
    EXPECT_LT(max_abs_diff(log_softmax(x64), log_softmax_reference(x64)), 1e-13);
  }
}

TEST(Softmax, NonContiguousInputMatchesItsContiguousCopy) {
  Tensor x = rand32({13, 7, 5}, 4, -3.0, 3.0);
  Tensor xp = x.permute({2, 0, 1});  // (5, 13, 7), rows strided
  EXPECT_FALSE(xp.is_contiguous());
  EXPECT_EQ(max_abs_diff(softmax(xp), softmax(xp.contiguous())), 0.0);
  EXPECT_LT(max_abs_diff(softmax(xp), softmax_reference(xp)), 2e-7);
  Tensor b = rand32({1, 9}, 5).expand({4, 9});  // broadcast rows
  EXPECT_LT(max_abs_diff(log_softmax(b), log_softmax_reference(b.contiguous())), 4e-6);
}

TEST(Softmax, LogSoftmaxIsLogOfSoftmax) {
  Tensor x = rand32({11, 29}, 6, -5.0, 5.0).to(DType::f64);
  EXPECT_LT(max_abs_diff(log_softmax(x), log(softmax(x))), 1e-12);
}

TEST(Softmax, EdgeShapes) {
  EXPECT_EQ(softmax(scalar(3.0)).item<float>(), 1.0f);
  EXPECT_EQ(softmax(zeros({0, 4})).shape(), (Shape{0, 4}));
  EXPECT_EQ(softmax(zeros({3, 0})).shape(), (Shape{3, 0}));
  EXPECT_THROW(softmax(zeros({2}, DType::i64)), DTypeError);
}

TEST(Softmax, Gradcheck) {
  Tensor x = leaf64({3, 5, 7}, 11, -2.0, 2.0);
  EXPECT_GRADCHECK([](const Inputs& v) { return softmax(v[0]); }, {x});
  EXPECT_GRADCHECK([](const Inputs& v) { return log_softmax(v[0]); }, {x});
  // Permuted (strided rows) and broadcast inputs.
  EXPECT_GRADCHECK([](const Inputs& v) { return softmax(v[0].permute({2, 0, 1})); }, {x});
  EXPECT_GRADCHECK([](const Inputs& v) { return log_softmax(v[0].transpose(1, 2)); }, {x});
  Tensor row = leaf64({1, 9}, 12, -2.0, 2.0);
  EXPECT_GRADCHECK([](const Inputs& v) { return softmax(v[0].expand({4, 9})); }, {row});
  // Composed: the gradient flowing in is not all ones.
  Tensor w = leaf64({7}, 13);
  EXPECT_GRADCHECK([](const Inputs& v) { return mul(softmax(v[0]), v[1]); }, (Inputs{x, w}));
  EXPECT_GRADCHECK([](const Inputs& v) { return softmax(log_softmax(v[0])); }, {x});
}

TEST(Softmax, GradcheckWithMaskedEntries) {
  Tensor x = leaf64({3, 6}, 14, -2.0, 2.0);
  Tensor mask = from_vector<double>({1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {3, 6});
  EXPECT_GRADCHECK([mask](const Inputs& v) { return softmax(where(mask, v[0], -1e6)); }, {x});
}

// The backward kernels against the composite formulas, on a large odd shape
// (rows split over threads).
TEST(Softmax, BackwardMatchesCompositeFormula) {
  Tensor x = rand32({37, 1001}, 15, -4.0, 4.0).to(DType::f64);
  Tensor g = rand32({37, 1001}, 16).to(DType::f64);
  x.requires_grad_();
  Tensor y = softmax(x);
  y.backward(g);
  Tensor yd = y.detach();
  Tensor want = mul(yd, sub(g, sum(mul(g, yd), {-1}, true)));
  EXPECT_LT(max_abs_diff(x.grad(), want), 1e-15);

  x.zero_grad();
  Tensor ly = log_softmax(x);
  ly.backward(g);
  Tensor want_l = sub(g, mul(exp(ly.detach()), sum(g, {-1}, true)));
  EXPECT_LT(max_abs_diff(x.grad(), want_l), 1e-14);
}

TEST(VecMath, ExpSimdMatchesStdExp) {
  std::vector<float> xs;
  for (float x = -86.8f; x < 88.7f; x += 0.0137f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-8f, -1e-8f, 0.5f * 0.6931472f, 88.72f}) xs.push_back(x);
  float worst = 0;
  for (float x : xs) {
    float want = std::exp(x), got = attn::detail::exp_simd<float>(x);
    worst = std::max(worst, std::fabs(got - want) / want);
  }
  EXPECT_LT(worst, 3e-7f);  // ~2.5 ulp
  EXPECT_EQ(attn::detail::exp_simd<float>(-100.0f), 0.0f);
  EXPECT_EQ(attn::detail::exp_simd<float>(-1e6f), 0.0f);
  EXPECT_EQ(attn::detail::exp_simd<float>(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isinf(attn::detail::exp_simd<float>(89.0f)));
  EXPECT_TRUE(std::isinf(attn::detail::exp_simd<float>(INFINITY)));
  EXPECT_TRUE(std::isnan(attn::detail::exp_simd<float>(NAN)));
  EXPECT_EQ(attn::detail::exp_simd<float>(0.0f), 1.0f);
}

// The fused length-masked softmax against its definition: softmax of the
// scores with masked entries replaced by -1e6 (built from where and a mask).
TEST(MaskedSoftmaxLengths, MatchesWhereReferenceForwardAndBackward) {
  for (auto [B, Q, K] : {std::tuple{1, 1, 1}, {2, 3, 7}, {3, 5, 33}, {2, 1, 257}}) {
    Tensor x32 = rand32({B, Q, K}, 40 + K, -4, 4);
    Generator gen(K);
    Tensor lens = randint(0, K + 1, {B, Q}, gen);
    std::vector<float> m(static_cast<std::size_t>(B * Q * K));
    auto lv = to_vector<std::int64_t>(lens);
    for (std::int64_t r = 0; r < B * Q; ++r)
      for (std::int64_t k = 0; k < K; ++k) m[r * K + k] = k < lv[r] ? 1.0f : 0.0f;
    Tensor mask = from_vector(m, {B, Q, K});
    Tensor a = x32.detach(), b = x32.detach().clone();
    a.requires_grad_();
    b.requires_grad_();
    Tensor fast = masked_softmax_lengths(a, lens);
    Tensor ref = softmax(where(mask, b, -1e6));
    EXPECT_LT(max_abs_diff(fast, ref), 1e-6) << B << "x" << Q << "x" << K;
    Tensor w = rand32({B, Q, K}, 7);
    sum(mul(fast, w)).backward();
    sum(mul(ref, w)).backward();
    EXPECT_LT(max_abs_diff(a.grad(), b.grad()), 1e-6) << B << "x" << Q << "x" << K;
  }
}

TEST(MaskedSoftmaxLengths, GradcheckAndErrors) {
  Tensor x = leaf64({2, 3, 5}, 3);
  Tensor lens = from_vector(std::vector<std::int64_t>{0, 1, 5, 2, 3, 4}, {2, 3});
  EXPECT_GRADCHECK([&](const Inputs& v) { return masked_softmax_lengths(v[0], lens); }, {x});
  EXPECT_GRADCHECK(
      [&](const Inputs& v) {
        return masked_softmax_lengths(v[0].transpose(1, 2), lens.narrow(1, 0, 1).expand({2, 5}));
      },
      {x});
  EXPECT_THROW(masked_softmax_lengths(x, from_vector(std::vector<std::int64_t>{1, 2})), ShapeError);
  EXPECT_THROW(masked_softmax_lengths(x, full({2, 3}, 6.0, DType::i64)), ValueError);
  EXPECT_THROW(masked_softmax_lengths(x, full({2, 3}, NAN, DType::f32)), ValueError);
  // A fractional length k < 2.5 keeps three entries, as d2l's arange(K) < valid_len.
  Tensor y = masked_softmax_lengths(zeros({1, 1, 4}), full({1, 1}, 2.5, DType::f32));
  EXPECT_NEAR(y.at({0, 0, 2}), 1.0 / 3.0, 1e-6);
  EXPECT_EQ(y.at({0, 0, 3}), 0.0);
}
