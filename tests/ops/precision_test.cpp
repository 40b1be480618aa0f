// bf16 mixed precision (ops/precision.h): the conversion kernel against its
// reference, bit for bit; every product path in bf16 against the reference
// product of the bf16-rounded operands; gradients; frozen weights; scopes.
#include "attn/ops/precision.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "attn/core/threads.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"
#include "ops/precision_internal.h"
#include "testing.h"

using namespace attn;
using attn::testing::rand32;

namespace {

float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// |c - ref| <= rtol * (|ra| @ |rb|) elementwise, where ra, rb are the
// operands rounded to bf16 and ref their product in double: what is left is
// the f32 accumulation. Also returns the largest relative difference from the
// f32 product, so a test can see that bf16 really ran.
double expect_bf16_product(const Tensor& c, const Tensor& a, const Tensor& b, double rtol = 2e-6) {
  Tensor ra = round_to_bf16(a), rb = round_to_bf16(b);
  Tensor ref = matmul_reference(ra, rb), scale = matmul_reference(abs(ra), abs(rb));
  Tensor f32 = matmul_reference(a, b);
  EXPECT_EQ(c.shape(), ref.shape());
  auto vc = to_vector<float>(c), vr = to_vector<float>(ref), vs = to_vector<float>(scale),
       vf = to_vector<float>(f32);
  double off_f32 = 0;
  for (std::size_t i = 0; i < vc.size(); ++i) {
    EXPECT_LE(std::fabs(double(vc[i]) - vr[i]), rtol * vs[i] + 1e-30)
        << "element " << i << " of " << shape_str(c.shape());
    if (vs[i] > 0) off_f32 = std::max(off_f32, std::fabs(double(vc[i]) - vf[i]) / vs[i]);
  }
  return off_f32;
}

class Bf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!bf16_supported()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  }
};

}  // namespace

// The reference itself: round to nearest, ties to even; NaN, infinities,
// zeros and subnormals as the instructions treat them.
TEST(Bf16Reference, RoundsToNearestEven) {
  EXPECT_EQ(to_bf16_reference(1.0f), 0x3f80);
  EXPECT_EQ(to_bf16_reference(bits_to_float(0x3f808000)), 0x3f80);  // tie, to even (down)
  EXPECT_EQ(to_bf16_reference(bits_to_float(0x3f818000)), 0x3f82);  // tie, to even (up)
  EXPECT_EQ(to_bf16_reference(bits_to_float(0x3f808001)), 0x3f81);  // above the tie
  EXPECT_EQ(to_bf16_reference(bits_to_float(0x3f807fff)), 0x3f80);  // below it
  EXPECT_EQ(to_bf16_reference(-2.5f), 0xc020);
  EXPECT_EQ(to_bf16_reference(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_EQ(to_bf16_reference(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(to_bf16_reference(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(to_bf16_reference(-0.0f), 0x8000);
  EXPECT_EQ(to_bf16_reference(bits_to_float(0x00000001)), 0x0000);  // subnormal -> 0
  EXPECT_EQ(to_bf16_reference(bits_to_float(0x807fffff)), 0x8000);
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16_reference(std::nanf("")))));
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16_reference(bits_to_float(0x7f800001)))));  // sNaN
  EXPECT_EQ(from_bf16(0x3f80), 1.0f);
  EXPECT_EQ(from_bf16(to_bf16_reference(3.0f)), 3.0f);
}

TEST(Bf16Reference, ParsesPrecisionNames) {
  EXPECT_EQ(parse_precision("f32"), Precision::f32);
  EXPECT_EQ(parse_precision("bf16"), Precision::bf16);
  EXPECT_THROW(parse_precision("fp16"), ValueError);
  EXPECT_STREQ(precision_name(Precision::bf16), "bf16");
}

// The vector kernel, on odd lengths (its masked tail) and on every kind of
// value, gives the reference's bits.
TEST_F(Bf16, ConversionKernelEqualsReference) {
  Generator gen(7);
  for (std::int64_t n : {1, 2, 15, 16, 17, 31, 33, 63, 100, 1037}) {
    std::vector<float> x(static_cast<std::size_t>(n));
    Tensor r = uniform(-1, 1, {n}, gen, DType::f32);
    const float* pr = r.data<float>();
    const std::uint32_t specials[] = {0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x00800000,
                                      0x7f7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001,
                                      0xffc00001, 0x3f808000, 0x3f818000, 0x3f807fff, 0x4b7fffff};
    for (std::size_t i = 0; i < x.size(); ++i) {
      // Magnitudes from 1e-30 to 1e30, and the special values spread through.
      x[i] = pr[i] * std::pow(10.0f, static_cast<float>(static_cast<int>(i * 7 % 61) - 30));
      if (i % 5 == 3) x[i] = bits_to_float(specials[(i / 5) % std::size(specials)]);
    }
    std::vector<std::uint16_t> got(x.size() + 1, 0xabcd);
    to_bf16(x.data(), got.data(), n);
    for (std::size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(got[i], to_bf16_reference(x[i])) << "n " << n << ", element " << i;
    EXPECT_EQ(got[x.size()], 0xabcd) << "wrote past the end";
  }
}

// Every path of a product: one matrix, transposed views, the Linear fold,
// batches through the primitive, broadcast batches, tiny products, K = 1.
TEST_F(Bf16, ProductsEqualTheReferenceOfRoundedOperands) {
  PrecisionScope bf16(Precision::bf16);
  double off = 0;
  off = std::max(off, expect_bf16_product(matmul(rand32({37, 53}, 1), rand32({53, 29}, 2)),
                                          rand32({37, 53}, 1), rand32({53, 29}, 2)));
  {
    Tensor a = rand32({53, 37}, 3).transpose(0, 1), b = rand32({29, 53}, 4).transpose(0, 1);
    off = std::max(off, expect_bf16_product(matmul(a, b), a, b));
  }
  {
    Tensor a = rand32({3, 7, 53}, 5), b = rand32({53, 29}, 6);  // folds into one GEMM
    off = std::max(off, expect_bf16_product(matmul(a, b), a, b));
  }
  {
    Tensor a = rand32({3, 5, 7}, 7), b = rand32({3, 7, 11}, 8);
    off = std::max(off, expect_bf16_product(bmm(a, b), a, b));
  }
  {
    Tensor a = rand32({2, 1, 5, 7}, 9), b = rand32({3, 7, 4}, 10);
    off = std::max(off, expect_bf16_product(matmul(a, b), a, b));
  }
  {
    Tensor a = rand32({4, 9, 13}, 11).transpose(1, 2), b = rand32({4, 9, 6}, 12);
    off = std::max(off, expect_bf16_product(matmul(a, b), a, b));
  }
  {
    Tensor a = rand32({1, 32}, 13), b = rand32({32, 32}, 14);  // a decoding step's size
    off = std::max(off, expect_bf16_product(matmul(a, b), a, b));
  }
  {
    Tensor a = rand32({6, 1}, 15), b = rand32({1, 5}, 16);
    expect_bf16_product(matmul(a, b), a, b);
  }
  {
    // A sparse view (every third column): copied before the conversion.
    Tensor a = rand32({9, 60}, 17).narrow(1, 0, 20), b = rand32({20, 7}, 18);
    off = std::max(off, expect_bf16_product(matmul(a, b), a, b));
  }
  // bf16 really ran: an f32 product would be within 2e-6 of the f32 reference.
  EXPECT_GT(off, 1e-4);
}

TEST_F(Bf16, LinearForwardAndBackward) {
  Tensor x = rand32({3, 5, 23}, 21).requires_grad_(true);
  Tensor w = rand32({19, 23}, 22).requires_grad_(true);
  Tensor bias = rand32({19}, 23).requires_grad_(true);
  Tensor g = rand32({3, 5, 19}, 24);
  {
    PrecisionScope bf16(Precision::bf16);
    Tensor y = linear(x, w, bias);
    expect_bf16_product(sub(y.detach(), bias.detach()), x.detach(), w.detach().transpose(0, 1),
                        4e-6);
    sum(mul(y, g)).backward();
  }
  // dx = g @ w and dw = g^T x, each a bf16 product of f32 operands.
  expect_bf16_product(x.grad(), g, w.detach());
  expect_bf16_product(w.grad(), g.reshape({-1, 19}).transpose(0, 1), x.detach().reshape({-1, 23}));
  EXPECT_LT(max_abs_diff(bias.grad(), sum(g.reshape({-1, 19}), {0})), 1e-5);
}

// The one-pass rounding of a Linear layer's output gradient: every element
// the reference's bits, the column sums within f32 rounding of the exact
// sums (the rows summed in blocks, so the bound is that of any order), and
// the same bits on one thread as on two, on sizes around the block of 64
// rows and the vector widths; through a ReLU, the same as rounding the
// masked rows.
TEST_F(Bf16, RoundingWithColumnSumsEqualsReference) {
  struct ThreadGuard {
    int saved = get_num_threads();
    ~ThreadGuard() { set_num_threads(saved); }
  } guard;
  for (std::int64_t M : {1, 2, 63, 64, 65, 130, 2049})
    for (std::int64_t N : {1, 17, 33, 300}) {
      SCOPED_TRACE(fmt::format("{} x {}", M, N));
      Tensor x = rand32({M, N}, static_cast<std::uint64_t>(M * 1000 + N));
      const float* px = x.data<float>();
      std::vector<float> sums[2];
      std::vector<std::uint16_t> bits[2];
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        std::vector<std::uint16_t>& b = bits[threads - 1];
        std::vector<float>& s = sums[threads - 1];
        b.assign(static_cast<std::size_t>(M * N) + 1, 0xabcd);
        s.assign(static_cast<std::size_t>(N) + 1, -7.0f);
        detail::to_bf16_with_column_sums(px, M, N, b.data(), s.data());
        ASSERT_EQ(b.back(), 0xabcd) << "wrote past the rounded rows";
        ASSERT_EQ(s.back(), -7.0f) << "wrote past the sums";
      }
      EXPECT_EQ(bits[0], bits[1]);
      EXPECT_EQ(sums[0], sums[1]) << "the sums depend on the thread count";
      for (std::int64_t i = 0; i < M * N; ++i)
        ASSERT_EQ(bits[0][static_cast<std::size_t>(i)], to_bf16_reference(px[i])) << i;
      for (std::int64_t j = 0; j < N; ++j) {
        double exact = 0, mag = 0;
        for (std::int64_t r = 0; r < M; ++r) {
          exact += px[r * N + j];
          mag += std::fabs(px[r * N + j]);
        }
        EXPECT_LE(std::fabs(sums[0][static_cast<std::size_t>(j)] - exact),
                  static_cast<double>(M) * 0x1p-24 * mag + 1e-30)
            << "column " << j;
      }
      // Without sums: the same bits.
      std::vector<std::uint16_t> alone(static_cast<std::size_t>(M * N));
      detail::to_bf16_with_column_sums(px, M, N, alone.data(), nullptr);
      alone.push_back(0xabcd);
      EXPECT_EQ(alone, bits[0]);
      // Through a ReLU: x masked by [y > 0], then rounded and summed; the
      // sums of the masked rows in the same order as above.
      Tensor y = rand32({M, N}, static_cast<std::uint64_t>(M * 1000 + N + 7));
      const float* py = y.data<float>();
      std::vector<float> masked(static_cast<std::size_t>(M * N) + 1, -7.0f), expect(masked);
      std::vector<std::uint16_t> mbits(static_cast<std::size_t>(M * N));
      std::vector<float> msums(static_cast<std::size_t>(N)), esums(static_cast<std::size_t>(N));
      for (std::int64_t i = 0; i < M * N; ++i) expect[i] = py[i] > 0 ? px[i] : 0.0f;
      detail::to_bf16_with_column_sums(px, M, N, mbits.data(), msums.data(), py, masked.data());
      EXPECT_EQ(masked, expect) << "the mask, or a write past the rows";
      std::vector<std::uint16_t> ebits(mbits.size());
      detail::to_bf16_with_column_sums(expect.data(), M, N, ebits.data(), esums.data());
      EXPECT_EQ(mbits, ebits);
      EXPECT_EQ(msums, esums);
    }
}

// A Linear layer's backward in bf16 rounds g once for both products (one
// pass, which also sums db): dx and dW are the very bits of the two bf16
// products of the same f32 operands, with and without the ReLU (whose
// masked g' is what gets rounded), over several 64-row blocks.
TEST_F(Bf16, LinearBackwardRoundsItsGradientOnceForBothProducts) {
  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "linear_relu" : "linear");
    Tensor x = rand32({3, 70, 41}, 61).requires_grad_(true);
    Tensor w = rand32({301, 41}, 62).requires_grad_(true);
    Tensor bias = rand32({301}, 63).requires_grad_(true);
    Tensor g = rand32({3, 70, 301}, 64);
    PrecisionScope bf16(Precision::bf16);
    Tensor y = relu ? linear_relu(x, w, bias) : linear(x, w, bias);
    sum(mul(y, g)).backward();
    Tensor gm = relu ? mul(g, gt(y.detach(), 0.0)) : g;
    Tensor g2 = gm.reshape({-1, 301});
    EXPECT_EQ(max_abs_diff(x.grad(), matmul(gm, w.detach())), 0.0);
    EXPECT_EQ(max_abs_diff(w.grad(), matmul(g2.transpose(0, 1), x.detach().reshape({-1, 41}))),
              0.0);
    EXPECT_LT(max_abs_diff(bias.grad(), sum(g2, {0})), 1e-4);
    // bf16 really ran on the products.
    EXPECT_GT(max_abs_diff(x.grad(), matmul_reference(gm, w.detach())), 1e-5);
  }
}

// In training, a Linear layer's forward rounds x and W once and its
// backward takes that rounding again (dW = g^T x, dx = g W): the backward
// uses x and W as the forward saw them. Changed in place after the forward,
// the gradients are still the bf16 products of the old values, bit for bit.
TEST_F(Bf16, LinearBackwardTakesTheRoundingOfTheForward) {
  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "linear_relu" : "linear");
    Tensor x = rand32({2, 37, 29}, 71).requires_grad_(true);
    Tensor w = rand32({45, 29}, 72).requires_grad_(true);
    Tensor g = rand32({2, 37, 45}, 73);
    const Tensor x0 = x.detach().clone(), w0 = w.detach().clone();
    PrecisionScope bf16(Precision::bf16);
    Tensor y = relu ? linear_relu(x, w) : linear(x, w);
    for (Tensor t : {x, w}) {
      float* p = t.data<float>();
      for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] * 3.0f + 1.0f;
    }
    sum(mul(y, g)).backward();
    Tensor gm = relu ? mul(g, gt(y.detach(), 0.0)) : g;
    EXPECT_EQ(max_abs_diff(x.grad(), matmul(gm, w0)), 0.0);
    EXPECT_EQ(
        max_abs_diff(w.grad(), matmul(gm.reshape({-1, 45}).transpose(0, 1), x0.reshape({-1, 29}))),
        0.0);
  }
}

// Open reuses form a stack per thread: the innermost match counts, and each
// one's end uncovers the one outside it.
TEST_F(Bf16, ReusesStackInnermostFirst) {
  Tensor a = rand32({4, 6}, 81), b = rand32({3, 5}, 82);
  const std::uint16_t one[1] = {1}, two[1] = {2}, three[1] = {3};
  auto find = [](const Tensor& t) {
    return detail::Bf16Reuse::find(t.storage().get(), t.data<float>(), detail::storage_span(t));
  };
  EXPECT_EQ(find(a), nullptr);
  {
    detail::Bf16Reuse ra(a, one);
    {
      detail::Bf16Reuse rb(b, two);
      EXPECT_EQ(find(a), one);
      EXPECT_EQ(find(a.transpose(0, 1)), one);  // the same floats
      EXPECT_EQ(find(b), two);
      EXPECT_EQ(find(a.narrow(0, 1, 2)), nullptr);  // not the same floats
      {
        detail::Bf16Reuse ra2(a, three);
        EXPECT_EQ(find(a), three);
      }
      EXPECT_EQ(find(a), one);
    }
    EXPECT_EQ(find(b), nullptr);
    EXPECT_EQ(find(a), one);
  }
  EXPECT_EQ(find(a), nullptr);
}

// Frozen parameters: converted once, the same bits as converting each time;
// a new scope converts again (no stale copy).
TEST_F(Bf16, FrozenWeightsGiveTheSameProducts) {
  Tensor w = rand32({29, 53}, 31), x = rand32({4, 53}, 32);
  Tensor plain, frozen1, frozen2;
  {
    PrecisionScope bf16(Precision::bf16);
    plain = linear(x, w);
  }
  {
    PrecisionScope bf16(Precision::bf16, {w});
    frozen1 = linear(x, w);
    frozen2 = linear(x, w);
  }
  EXPECT_EQ(max_abs_diff(plain, frozen1), 0.0);
  EXPECT_EQ(max_abs_diff(plain, frozen2), 0.0);
  w.data<float>()[0] += 1.0f;  // outside any scope: allowed
  Tensor changed;
  {
    PrecisionScope bf16(Precision::bf16, {w});
    changed = linear(x, w);
  }
  EXPECT_GT(max_abs_diff(changed, plain), 1e-3);
  expect_bf16_product(changed, x, w.transpose(0, 1));
}

// Scopes nest and restore; f32 inside a bf16 scope is exactly f32.
TEST_F(Bf16, ScopesNestAndRestore) {
  Tensor a = rand32({17, 33}, 41), b = rand32({33, 9}, 42);
  const Tensor f32 = matmul(a, b);
  EXPECT_EQ(matmul_precision(), Precision::f32);
  {
    PrecisionScope outer(Precision::bf16);
    EXPECT_EQ(matmul_precision(), Precision::bf16);
    {
      PrecisionScope inner(Precision::f32);
      EXPECT_EQ(max_abs_diff(matmul(a, b), f32), 0.0);
    }
    EXPECT_EQ(matmul_precision(), Precision::bf16);
    EXPECT_GT(max_abs_diff(matmul(a, b), f32), 0.0);
  }
  EXPECT_EQ(matmul_precision(), Precision::f32);
  EXPECT_EQ(max_abs_diff(matmul(a, b), f32), 0.0);
}

// f64 products (gradient checks) are never rounded.
TEST_F(Bf16, F64IsUntouched) {
  Tensor a = attn::testing::leaf64({5, 7}, 51), b = attn::testing::leaf64({7, 3}, 52);
  Tensor ref = matmul(a, b);
  PrecisionScope bf16(Precision::bf16);
  EXPECT_EQ(max_abs_diff(matmul(a, b), ref), 0.0);
}

// The measured rate of bf16 dot products against f32 FMAs: a figure of the
// hardware, the same on every call (measured once), well inside (0, 8): 2
// is a bf16 instruction issuing as often as an FMA. Measured 0.49-0.55 on
// an Intel Xeon without AMX. 0 where there is no AVX-512 BF16.
TEST(Bf16Rate, MeasuredOnceAndPlausible) {
  const double rate = bf16_dot_rate();
  std::printf("bf16 dot products at %.3fx the f32 FMA rate%s\n", rate,
              bf16_products_on_amx() ? " (oneDNN on AMX)" : "");
  EXPECT_EQ(bf16_dot_rate(), rate);
  if (!bf16_supported()) {
    EXPECT_EQ(rate, 0.0);
    return;
  }
  EXPECT_GT(rate, 0.1);
  EXPECT_LT(rate, 8.0);
}

// Without AVX-512 BF16 (this CPU, or forced by ATTN_NO_BF16=1, as ctest's
// ops_precision_test_no_bf16 runs this file): a bf16 scope is refused, opened
// or joined, with the reason; f32 scopes still open and join.
TEST(Bf16Fallback, WithoutBf16TheScopeIsRefused) {
  if (bf16_supported()) GTEST_SKIP() << "this CPU has AVX-512 BF16 (ATTN_NO_BF16=1 runs this)";
  const std::string reason = "bf16 precision needs a CPU with AVX-512 BF16, which this one lacks";
  try {
    PrecisionScope scope(Precision::bf16);
    ADD_FAILURE() << "a bf16 scope opened without AVX-512 BF16";
  } catch (const ValueError& e) {
    EXPECT_EQ(e.what(), reason);
  }
  try {
    PrecisionScope join(PrecisionScope::Shared{Precision::bf16, nullptr});
    ADD_FAILURE() << "a bf16 scope joined without AVX-512 BF16";
  } catch (const ValueError& e) {
    EXPECT_EQ(e.what(), reason);
  }
  PrecisionScope f32(Precision::f32);
  PrecisionScope join(PrecisionScope::current());
  EXPECT_EQ(matmul_precision(), Precision::f32);
}
