// linear_argmax (attn/ops/matmul.h): each row's position of the largest
// element of linear(x, W, b), against linear() itself in the same scope and
// the first-largest rule (ops/row_stats.h's row_argmax), on the plain path
// and through the int8 screen (ops/linear_argmax.cpp): odd sizes, exact and
// one-ulp ties, inputs that make the int8 bound wide, infinities and NaNs,
// rows too few to be packed. The screen must give the same positions, bit
// for bit; where it should run, the tests check that it did.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/matmul.h"
#include "attn/ops/precision.h"
#include "attn/ops/quantize.h"
#include "ops/f32_gemm.h"
#include "ops/precision_internal.h"
#include "ops/row_stats.h"
#include "testing.h"

using namespace attn;
using attn::testing::rand32;

namespace {

constexpr std::int64_t kK = 131, kN = 1103;  // odd sizes; N above the screen's 1,024

// Whether linear_argmax screens where the conditions hold: a CPU with VNNI
// and AVX-512, and the screen not turned off.
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
  PrecisionScope scope(Precision::f32, {w, b, wt});
  for (std::int64_t M : {16, 17, 45, 130}) {
    SCOPED_TRACE(M);
    Tensor x = rand32({M, kK}, 10 + static_cast<std::uint64_t>(M), -2.0, 2.0);
    expect_same(x, w, b, M);
    expect_same(x, w, Tensor(), M);
    expect_same(x, wt, b, M);
  }
  if (screen_runs()) {
    const detail::ArgmaxScreenStats s = detail::argmax_screen_stats();
    EXPECT_GT(s.candidates, 0);
    EXPECT_EQ(s.full_rows, 0);
  }
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
  if (screen_runs()) {
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

// Fewer than 16 rows before the weight was packed: linear() takes the
// unpacked path, and so does linear_argmax (no screen); after a product of
// 16 rows, or under PackAllRows, they take the screen.
TEST(LinearArgmax, FewRowsFollowLinearsPath) {
  Tensor w = rand32({kN, kK}, 17), b = rand32({kN}, 18);
  Tensor few = rand32({3, kK}, 19), many = rand32({16, kK}, 20);
  autograd::NoGradGuard no_grad;
  {
    PrecisionScope scope(Precision::f32, {w, b});
    expect_same(few, w, b, 0);
    expect_same(many, w, b, 16);
    expect_same(few, w, b, 3);
  }
  PrecisionScope scope(Precision::f32, {w, b});
  PackAllRows all;
  expect_same(few, w, b, 3);
}

// Bad operands: the shapes linear() checks, and a weight of no rows.
TEST(LinearArgmax, BadOperandsAreClearErrors) {
  Tensor w = rand32({kN, kK}, 21);
  EXPECT_THROW(linear_argmax(rand32({4, kK + 1}, 22), w), ShapeError);
  EXPECT_THROW(linear_argmax(rand32({4, kK}, 23), w, rand32({kN + 1}, 24)), ShapeError);
  EXPECT_THROW(linear_argmax(rand32({4, kK}, 25), Tensor::empty({0, kK})), ShapeError);
}
