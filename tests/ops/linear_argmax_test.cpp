// linear_argmax (attn/ops/matmul.h): each row's position of the largest
// element of linear(x, W, b), against linear() itself in the same scope and
// the first-largest rule (kernels/row_stats/row_stats.h's row_argmax), on the plain path
// and through the int8 screen (ops/linear_argmax.cpp): odd sizes, exact and
// one-ulp ties, inputs that make the int8 bound wide, infinities and NaNs,
// rows too few to be packed. The screen must give the same positions, bit
// for bit; where it should run, the tests check that it did.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string_view>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/matmul.h"
#include "attn/ops/precision.h"
#include "attn/ops/quantize.h"
#include "kernels/gemm/f32_gemm.h"
#include "kernels/row_stats/row_stats.h"
#include "ops/precision_internal.h"
#include "testing.h"

using namespace attn;
using attn::testing::rand32;

namespace {

constexpr std::int64_t kK = 131, kN = 1103;  // odd sizes; N above the screen's 1,024

// Whether linear_argmax screens where the conditions hold: an int8 kernel
// (AVX-512 VNNI or AVX2) and attn's f32 kernel, and the screen not turned
// off.
bool screen_runs() {
  const char* off = std::getenv("ATTN_NO_ARGMAX_SCREEN");
  if (off && *off && std::string_view(off) != "0") return false;
  return int8_supported() && detail::f32_gemm_supported();
}

// The positions argmax takes over linear()'s rows.
std::vector<std::int64_t> expected(const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor y = linear(x, w, b).contiguous();
  const std::int64_t N = w.size(0), M = y.numel() / N;
  std::vector<std::int64_t> out(static_cast<std::size_t>(M));
  for (std::int64_t m = 0; m < M; ++m)
    out[static_cast<std::size_t>(m)] = detail::row_argmax(y.data<float>() + m * N, N);
  return out;
}

// linear_argmax(x, w, b) equals expected(); `screened` rows went through the
// screen (where it runs).
void expect_same(const Tensor& x, const Tensor& w, const Tensor& b, std::int64_t screened) {
  const detail::ArgmaxScreenStats before = detail::argmax_screen_stats();
  const Tensor got = linear_argmax(x, w, b);
  const detail::ArgmaxScreenStats after = detail::argmax_screen_stats();
  const std::vector<std::int64_t> want = expected(x, w, b);
  ASSERT_EQ(got.dtype(), DType::i64);
  ASSERT_EQ(got.numel(), static_cast<std::int64_t>(want.size()));
  const Tensor gc = got.contiguous();
  for (std::size_t m = 0; m < want.size(); ++m)
    EXPECT_EQ(gc.data<std::int64_t>()[m], want[m]) << "row " << m;
  EXPECT_EQ(after.rows - before.rows, screen_runs() ? screened : 0);
}

}  // namespace

// Outside a scope: the plain path, any leading shape, f32 and f64.
TEST(LinearArgmax, PlainPathEqualsArgmaxOfLinear) {
  Tensor w = rand32({kN, kK}, 1), b = rand32({kN}, 2);
  Tensor x = rand32({2, 7, kK}, 3, -2.0, 2.0);
  autograd::NoGradGuard no_grad;
  expect_same(x, w, b, 0);
  expect_same(x, w, Tensor(), 0);
  EXPECT_EQ(linear_argmax(x, w, b).shape(), (Shape{2, 7}));
  const Tensor x64 = x.to(DType::f64), w64 = w.to(DType::f64), b64 = b.to(DType::f64);
  const Tensor got = linear_argmax(x64, w64, b64).contiguous();
  const Tensor y = linear(x64, w64, b64).contiguous();
  for (std::int64_t m = 0; m < 14; ++m) {
    const double* row = y.data<double>() + m * kN;
    std::int64_t best = 0;
    for (std::int64_t n = 1; n < kN; ++n)
      if (row[n] > row[best]) best = n;
    EXPECT_EQ(got.data<std::int64_t>()[m], best) << m;
  }
}

// In a scope, the screen: row counts around the packing threshold and the
// kernel's tiles, with and without a bias; a weight read transposed.
TEST(LinearArgmax, ScreenEqualsArgmaxOfLinear) {
  Tensor w = rand32({kN, kK}, 4), b = rand32({kN}, 5);
  Tensor wt = rand32({kK, kN}, 6).transpose(0, 1);  // strides (1, kN)
  autograd::NoGradGuard no_grad;
  const detail::ArgmaxScreenStats before = detail::argmax_screen_stats();
  {
    PrecisionScope scope(Precision::f32, {w, b, wt});
    for (std::int64_t M : {16, 17, 45, 130}) {
      SCOPED_TRACE(M);
      Tensor x = rand32({M, kK}, 10 + static_cast<std::uint64_t>(M), -2.0, 2.0);
      expect_same(x, w, b, M);
      expect_same(x, w, Tensor(), M);
      expect_same(x, wt, b, M);
    }
  }
  // A layer of exactly the screen's smallest size.
  Tensor w1024 = rand32({1024, kK}, 26);
  PrecisionScope scope(Precision::f32, {w1024});
  expect_same(rand32({20, kK}, 27), w1024, Tensor(), 20);
  if (screen_runs()) {
    const detail::ArgmaxScreenStats after = detail::argmax_screen_stats();
    EXPECT_GT(after.candidates, before.candidates);
    EXPECT_EQ(after.full_rows, before.full_rows);
  }
}

// Operands int8 holds exactly (every row's largest magnitude 127: scales of
// 1), so that the bound is its rounding terms alone, and sums that pass 2^24
// and come back (K 4,096: the first half adds, the second subtracts), so
// that the f32 chain rounds on its way. Rows P and P' differ by one in their
// first weight, which meets x's 1: their exact sums differ by 1 and their
// f32 results by their roundings, and the seed is chosen so that these
// make P' no larger than P. A screen without the rounding terms would keep
// only P' (the larger exact sum, which the int8 product gives exactly);
// argmax over the f32 results is P, the first of the largest.
TEST(LinearArgmax, RoundingTermsKeepChainsThatCross) {
  constexpr std::int64_t K = 4096, N = 1024, M = 16, P = 3, P2 = 700;
  auto chain = [](const std::vector<float>& x, const std::vector<float>& w) {
    float acc = 0.0f;
    for (std::size_t k = 0; k < x.size(); ++k) acc = std::fma(x[k], w[k], acc);
    return acc;
  };
  std::vector<float> xr(K, 127.0f), wp(K), wq(K);
  xr[0] = 1.0f;
  bool found = false;
  for (unsigned seed = 0; seed < 500 && !found; ++seed) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> big(60, 127);
    for (std::int64_t k = 0; k < K / 2; ++k) wp[k] = static_cast<float>(big(gen));
    std::vector<float> half(wp.begin(), wp.begin() + K / 2);
    std::shuffle(half.begin(), half.end(), gen);
    for (std::int64_t k = 0; k < K / 2; ++k) wp[K / 2 + k] = -half[k];
    for (std::int64_t k = K / 2; k < K / 2 + 40; ++k) wp[k] += 1.0f;  // the sum: 40 x 127
    wp[0] = 100.0f;  // room for P' = P + 1 there
    wp[1] = 127.0f;
    wp[K - 1] = -127.0f;
    wq = wp;
    wq[0] += 1.0f;
    std::int64_t exact = 0;  // P's sum, well above the other rows' 0
    for (std::int64_t k = 0; k < K; ++k)
      exact += static_cast<std::int64_t>(xr[k]) * static_cast<std::int64_t>(wp[k]);
    found = exact > 1000 && chain(xr, wq) <= chain(xr, wp);
  }
  ASSERT_TRUE(found) << "no seed gave chains that cross";
  Tensor x = Tensor::empty({M, K}), w = Tensor::empty({N, K});
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t k = 0; k < K; ++k) x.data<float>()[m * K + k] = xr[k];
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < K; ++k)
      w.data<float>()[n * K + k] = n == P ? wp[k] : n == P2 ? wq[k] : 0.0f;
  autograd::NoGradGuard no_grad;
  PrecisionScope scope(Precision::f32, {w});
  expect_same(x, w, Tensor(), M);
  // The crossing is built for products that sum k in order, as attn's f32
  // kernels do (and the screen runs with them). Where the f32 product runs
  // elsewhere (oneDNN, under ATTN_ISA=portable) its order decides, and the
  // argmax above is held to it.
  const Tensor y = linear(x, w);
  if (y.data<float>()[P] == chain(xr, wp) && y.data<float>()[P2] == chain(xr, wq))
    EXPECT_EQ(linear_argmax(x, w).data<std::int64_t>()[0], P);
  else
    EXPECT_FALSE(screen_runs()) << "the screen ran beside a product that is not in k order";
}

// Equal largest logits at two positions (the same weight row and bias):
// the first wins; a row one ulp above at a later position wins.
TEST(LinearArgmax, TiesGoToTheFirstPosition) {
  const std::int64_t M = 20;
  Tensor x = rand32({M, kK}, 7, -1.0, 1.0);
  Tensor w = rand32({kN, kK}, 8, -0.05, 0.05), b = rand32({kN}, 9, -0.01, 0.01);
  // Rows 5 and 1000 hold x's first row times 3: the largest logit of every row
  // near it, and of row 0 exactly tied.
  for (std::int64_t k = 0; k < kK; ++k) {
    const float v = 3 * x.data<float>()[k];
    w.data<float>()[5 * kK + k] = v;
    w.data<float>()[1000 * kK + k] = v;
  }
  b.data<float>()[1000] = b.data<float>()[5];
  autograd::NoGradGuard no_grad;
  {
    PrecisionScope scope(Precision::f32, {w, b});
    expect_same(x, w, b, M);
    EXPECT_EQ(linear_argmax(x, w, b).data<std::int64_t>()[0], 5);
  }
  // The later row's logit two ulps larger (through its bias): it wins.
  Tensor b2 = b.clone();
  {
    PrecisionScope scope(Precision::f32, {w, b});
    const float y5 = linear(x, w, b).contiguous().data<float>()[5];
    b2.data<float>()[1000] += 2 * (std::nextafter(y5, 1e30f) - y5);
  }
  PrecisionScope scope(Precision::f32, {w, b2});
  const Tensor y = linear(x, w, b2).contiguous();
  ASSERT_GT(y.data<float>()[1000], y.data<float>()[5]);
  expect_same(x, w, b2, M);
  EXPECT_EQ(linear_argmax(x, w, b2).data<std::int64_t>()[0], 1000);
}

// Inputs whose int8 rounding is coarse (one element 1,000 times the others:
// x's scale is set by it) and weights whose rows all lie close together:
// wide bounds and many candidates, the same answer.
TEST(LinearArgmax, WideBoundsStillExact) {
  const std::int64_t M = 33;
  Tensor x = rand32({M, kK}, 11, -1.0, 1.0);
  for (std::int64_t m = 0; m < M; ++m) x.data<float>()[m * kK + (m % kK)] = 1000.0f;
  Tensor base = rand32({1, kK}, 12), noise = rand32({kN, kK}, 13, -1e-4, 1e-4);
  Tensor w = add(noise, base).contiguous();
  autograd::NoGradGuard no_grad;
  PrecisionScope scope(Precision::f32, {w});
  const detail::ArgmaxScreenStats before = detail::argmax_screen_stats();
  expect_same(x, w, Tensor(), M);
  if (screen_runs()) {  // far more than the one or two of trained models
    EXPECT_GT(detail::argmax_screen_stats().candidates - before.candidates, 10 * M);
  }
}

// A row of x with a NaN or an infinity, a zero row, and a bias with a NaN:
// computed in full where the bound is not finite, the plain rule kept.
TEST(LinearArgmax, NonFiniteRowsKeepTheRule) {
  const std::int64_t M = 18;
  Tensor x = rand32({M, kK}, 14), w = rand32({kN, kK}, 15), b = rand32({kN}, 16);
  x.data<float>()[1 * kK + 3] = std::numeric_limits<float>::quiet_NaN();
  x.data<float>()[2 * kK + 7] = std::numeric_limits<float>::infinity();
  for (std::int64_t k = 0; k < kK; ++k) x.data<float>()[3 * kK + k] = 0.0f;
  autograd::NoGradGuard no_grad;
  {
    PrecisionScope scope(Precision::f32, {w, b});
    const detail::ArgmaxScreenStats before = detail::argmax_screen_stats();
    expect_same(x, w, b, M);
    if (screen_runs()) {
      EXPECT_EQ(detail::argmax_screen_stats().full_rows - before.full_rows, 2);
    }
  }
  Tensor bn = b.clone();
  bn.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();  // every row's first logit
  PrecisionScope scope(Precision::f32, {w, bn});
  expect_same(x, w, bn, M);
  EXPECT_EQ(linear_argmax(x, w, bn).data<std::int64_t>()[4], 0);
}

// The edges of the float range: a chain whose partial sum overflows (an
// infinite logit beside finite int8 values: computed in full), and inputs
// so small that x's norm is subnormal (its bound rounded up, not to nearest).
TEST(LinearArgmax, ExtremeMagnitudesKeepTheRule) {
  constexpr std::int64_t M = 16, N = 1024, K = 16;
  autograd::NoGradGuard no_grad;
  {
    Tensor x = zeros({M, K}), w = zeros({N, K});
    for (std::int64_t m = 0; m < M; ++m)
      x.data<float>()[m * K] = x.data<float>()[m * K + 1] = 1e20f;
    w.data<float>()[0] = 1e19f;  // row 0: 1e39 overflows, then -1e39 cannot bring it back
    w.data<float>()[1] = -1e19f;
    w.data<float>()[K] = w.data<float>()[K + 1] = 1e15f;  // row 1: 2e35
    PrecisionScope scope(Precision::f32, {w});
    expect_same(x, w, Tensor(), M);
    EXPECT_EQ(linear_argmax(x, w).data<std::int64_t>()[0], 0);
  }
  Tensor x = zeros({M, K}), w = zeros({N, K}), b = zeros({N});
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (std::int64_t m = 0; m < M; ++m) x.data<float>()[m * K] = x.data<float>()[m * K + 1] = tiny;
  w.data<float>()[5 * K] = w.data<float>()[5 * K + 1] = 1e38f;  // row 5: 2.8e-7
  b.data<float>()[7] = 2.5e-7f;  // row 7: 2.5e-7
  PrecisionScope scope(Precision::f32, {w, b});
  expect_same(x, w, b, M);
  EXPECT_EQ(linear_argmax(x, w, b).data<std::int64_t>()[0], 5);
}

// Fewer than 16 rows before the weight was packed: linear() takes the
// unpacked path, and so does linear_argmax (no screen). A screen made by 16
// rows counts as a packed copy, as a product of 16 rows would have made one:
// afterwards few rows take the screen, and linear() the packed kernel.
// Under PackAllRows any row count does; a 1-D x gives a 0-D position.
TEST(LinearArgmax, FewRowsFollowLinearsPath) {
  Tensor w = rand32({kN, kK}, 17), b = rand32({kN}, 18);
  Tensor few = rand32({3, kK}, 19), many = rand32({16, kK}, 20);
  autograd::NoGradGuard no_grad;
  {
    PrecisionScope scope(Precision::f32, {w, b});
    expect_same(few, w, b, 0);
    EXPECT_EQ(detail::packed_copies(), 0);
    const std::int64_t before = detail::argmax_screen_stats().rows;
    linear_argmax(many, w, b);  // no linear() call: the screen alone
    EXPECT_EQ(detail::argmax_screen_stats().rows - before, screen_runs() ? 16 : 0);
    // One copy either way: the screen's int8 one, or linear()'s packed one.
    EXPECT_EQ(detail::packed_copies(), 1);
    expect_same(few, w, b, 3);
  }
  PrecisionScope scope(Precision::f32, {w, b});
  PackAllRows all;
  expect_same(few, w, b, 3);
  Tensor one = rand32({kK}, 28);
  expect_same(one, w, b, 1);
  EXPECT_EQ(linear_argmax(one, w, b).dim(), 0);
  expect_same(Tensor::empty({0, kK}), w, b, 0);
}

// Where linear() does not run the f32 kernel, linear_argmax follows it
// without a screen: int8 weights (a QuantizeScope), bf16 products, and an
// x that records gradients (linear()'s unpacked path, also in an f32 scope).
TEST(LinearArgmax, OtherPathsFollowLinear) {
  Tensor w = rand32({kN, kK}, 29), b = rand32({kN}, 30), x = rand32({24, kK}, 31, -2.0, 2.0);
  if (int8_supported()) {
    autograd::NoGradGuard no_grad;
    QuantizeScope q({w, b});
    expect_same(x, w, b, 0);
  }
  if (bf16_supported()) {
    autograd::NoGradGuard no_grad;
    PrecisionScope scope(Precision::bf16, {w, b});
    expect_same(x, w, b, 0);
  }
  PrecisionScope scope(Precision::f32, {w, b});
  Tensor xg = x.clone();
  xg.requires_grad_();
  expect_same(xg, w, b, 0);
}

// Bad operands: the shapes linear() checks, and a weight of no rows.
TEST(LinearArgmax, BadOperandsAreClearErrors) {
  Tensor w = rand32({kN, kK}, 21);
  EXPECT_THROW(linear_argmax(rand32({4, kK + 1}, 22), w), ShapeError);
  EXPECT_THROW(linear_argmax(rand32({4, kK}, 23), w, rand32({kN + 1}, 24)), ShapeError);
  EXPECT_THROW(linear_argmax(rand32({4, kK}, 25), Tensor::empty({0, kK})), ShapeError);
}
