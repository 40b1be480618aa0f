#include "attn/ops/elementwise.h"

#include <bit>
#include <cstdint>

#include "kernels/vec/vec_math.h"
#include "testing.h"

using namespace attn;
using attn::testing::leaf64;

namespace {
using Fn = autograd::Function;
}

TEST(Elementwise, AddBroadcastsAndValues) {
  Tensor a = arange(0.0, 6.0, 1.0, DType::f32).reshape({2, 3});
  Tensor b = tensor({10.0f, 20.0f, 30.0f});
  EXPECT_EQ(to_vector<float>(a + b), (std::vector<float>{10, 21, 32, 13, 24, 35}));
  EXPECT_EQ(to_vector<float>(a * 2.0), (std::vector<float>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(to_vector<float>(1.0 - a), (std::vector<float>{1, 0, -1, -2, -3, -4}));
}

TEST(Elementwise, MismatchedShapesNameOpAndShapes) {
  try {
    add(zeros({2, 3}), zeros({4, 3}));
    FAIL() << "no throw";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(), "add: shapes [2, 3] and [4, 3] cannot be broadcast together");
  }
  EXPECT_THROW(add(zeros({2}), zeros({2}, DType::f64)), DTypeError);
}

TEST(Elementwise, BinaryGradcheckWithBroadcastAndPermutedInputs) {
  Tensor a = leaf64({3, 5, 7}, 1), b = leaf64({5, 1}, 2), c = leaf64({7, 5, 3}, 3, 0.5, 2.0);
  std::vector<Fn> fns = {
      [](const std::vector<Tensor>& v) { return add(v[0], v[1]); },
      [](const std::vector<Tensor>& v) { return sub(v[1], v[0]); },
      [](const std::vector<Tensor>& v) { return mul(v[0], v[1]); },
      [](const std::vector<Tensor>& v) {
        return div(v[0], v[2].permute({2, 1, 0}));
      },
      [](const std::vector<Tensor>& v) {
        return div(v[1], v[2].permute({2, 1, 0}));
      },
      [](const std::vector<Tensor>& v) { return mul(v[0].transpose(0, 2), v[2]); },
  };
  for (const auto& fn : fns) EXPECT_GRADCHECK(fn, (std::vector<Tensor>{a, b, c}));
}

TEST(Elementwise, UnaryGradcheck) {
  Tensor x = leaf64({4, 3, 5}, 7);
  Tensor pos = leaf64({5, 3}, 8, 0.2, 3.0);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return neg(v[0]); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return exp(v[0]); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return tanh(v[0].permute({2, 0, 1})); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return sigmoid(v[0]); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return relu(v[0]); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return abs(v[0]); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return sin(v[0]); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return cos(v[0].permute({1, 2, 0})); }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return log(v[0].transpose(0, 1)); }, {pos});
}

TEST(Elementwise, PowSqrtGradcheck) {
  Tensor pos = leaf64({3, 7}, 9, 0.2, 3.0);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return sqrt(v[0]); }, {pos});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return pow(v[0], 2.5); }, {pos});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return pow(v[0], -1.0); }, {pos});
}

TEST(Elementwise, ComparisonsAndWhere) {
  Tensor a = tensor({1.0f, 2.0f, 3.0f}), b = tensor({3.0f, 2.0f, 1.0f});
  EXPECT_EQ(to_vector<float>(lt(a, b)), (std::vector<float>{1, 0, 0}));
  EXPECT_EQ(to_vector<float>(eq(a, b)), (std::vector<float>{0, 1, 0}));
  EXPECT_EQ(to_vector<float>(ge(a, b)), (std::vector<float>{0, 1, 1}));
  EXPECT_EQ(to_vector<float>(where(gt(a, b), a, b)), (std::vector<float>{3, 2, 3}));
  Tensor c = leaf64({4, 1}, 11), x = leaf64({4, 5}, 12), y = leaf64({5}, 13);
  EXPECT_GRADCHECK(
      [c](const std::vector<Tensor>& v) { return where(gt(c.detach(), 0.0), v[0], v[1]); },
      (std::vector<Tensor>{x, y}));
}

TEST(Elementwise, LargeContiguousMatchesStridedPath) {
  Tensor a = attn::testing::rand32({300, 301}, 1), b = attn::testing::rand32({301, 300}, 2);
  Tensor fast = mul(a, b.transpose(0, 1).contiguous());
  Tensor strided = mul(a, b.transpose(0, 1));
  EXPECT_EQ(max_abs_diff(fast, strided), 0.0);
}

// tanh_simd and sigmoid_simd (kernels/vec/vec_math.h, the f32 kernels of tanh,
// sigmoid and the GRU's gates) against the double-precision functions, on a
// dense grid across both branches and at the special values: within 3e-7
// relative (about 2.5 ulp) or 1e-37 absolute.
TEST(VecMath, TanhAndSigmoidSimdMatchDouble) {
  std::vector<float> xs;
  for (float x = -20.0f; x < 20.0f; x += 0.00731f) xs.push_back(x);
  for (float x = -0.3f; x < 0.3f; x += 0.000173f) xs.push_back(x);  // the polynomial's edge
  for (float x : {0.0f, -0.0f, 1e-8f, -1e-8f, 1e-30f, 0.25f, -0.25f, 0.2499999f, 80.0f, -80.0f,
                  -100.0f, 1000.0f})
    xs.push_back(x);
  float worst_tanh = 0, worst_sig = 0;
  for (float x : xs) {
    const double t = std::tanh(static_cast<double>(x));
    const double s = 1 / (1 + std::exp(-static_cast<double>(x)));
    const float gt = attn::detail::tanh_simd<float>(x), gs = attn::detail::sigmoid_simd<float>(x);
    if (std::fabs(t) > 1e-37)
      worst_tanh = std::max(worst_tanh, static_cast<float>(std::fabs(gt - t) / std::fabs(t)));
    if (s > 1e-37) worst_sig = std::max(worst_sig, static_cast<float>(std::fabs(gs - s) / s));
    EXPECT_EQ(std::signbit(gt), std::signbit(x)) << x;
  }
  EXPECT_LT(worst_tanh, 3e-7f);
  EXPECT_LT(worst_sig, 3e-7f);
  EXPECT_EQ(attn::detail::tanh_simd<float>(INFINITY), 1.0f);
  EXPECT_EQ(attn::detail::tanh_simd<float>(-INFINITY), -1.0f);
  EXPECT_TRUE(std::isnan(attn::detail::tanh_simd<float>(NAN)));
  EXPECT_EQ(attn::detail::sigmoid_simd<float>(INFINITY), 1.0f);
  EXPECT_EQ(attn::detail::sigmoid_simd<float>(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(attn::detail::sigmoid_simd<float>(NAN)));
  // The ops themselves take them.
  Tensor x = from_vector<float>({-3.0f, -0.1f, 0.0f, 0.2f, 5.0f}, {5});
  std::vector<float> th = to_vector<float>(tanh(x)), sg = to_vector<float>(sigmoid(x));
  for (std::size_t i = 0; i < th.size(); ++i) {
    const float v = to_vector<float>(x)[i];
    EXPECT_EQ(th[i], attn::detail::tanh_simd<float>(v));
    EXPECT_EQ(sg[i], attn::detail::sigmoid_simd<float>(v));
  }
}

// exp, tanh and sigmoid over a long tensor run the vectorized loops (AVX2 or
// AVX-512 lanes, select_bits in place of branches): every element, the
// special values among them at every lane position, equals the scalar
// function's result bit for bit (NaN as NaN).
TEST(VecMath, VectorLoopsEqualScalarCalls) {
  const float special[] = {NAN,  INFINITY, -INFINITY, -100.0f, -86.9f, -86.8f, 88.72f, 89.0f,
                           0.0f, -0.0f,    0.25f,     -0.25f,  1e-30f, 20.0f,  -20.0f};
  std::vector<float> xs;
  for (int i = 0; i < 1031; ++i)
    xs.push_back(i % 3 == 0 ? special[(i / 3) % 15] : -30.0f + 0.0583f * static_cast<float>(i));
  Tensor x = from_vector<float>(xs, {static_cast<std::int64_t>(xs.size())});
  const std::vector<float> e = to_vector<float>(exp(x)), t = to_vector<float>(tanh(x)),
                           s = to_vector<float>(sigmoid(x));
  auto same = [](float got, float want) {
    return std::isnan(want)
               ? std::isnan(got)
               : std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want);
  };
  for (std::size_t i = 0; i < xs.size(); ++i) {
    EXPECT_TRUE(same(e[i], attn::detail::exp_simd<float>(xs[i]))) << "exp " << xs[i] << " at " << i;
    EXPECT_TRUE(same(t[i], attn::detail::tanh_simd<float>(xs[i])))
        << "tanh " << xs[i] << " at " << i;
    EXPECT_TRUE(same(s[i], attn::detail::sigmoid_simd<float>(xs[i])))
        << "sigmoid " << xs[i] << " at " << i;
  }
}
