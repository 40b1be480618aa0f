// The bf16 product of a frozen weight (src/kernels/gemm/bf16_gemm.h): the AVX-512
// BF16 kernel against the product in double of the same bf16 values, on
// random operands of odd sizes (every tile height, more than one chunk of
// tiles, partial column groups, odd K with its zero after each row, rows
// further apart than K, a weight read through strides), with and without a
// bias and the ReLU. The bound is the one f32 sums of exact products can
// miss by, (K + 2) 2^-24 (|x| |W| + |b|) elementwise: each of the K terms
// and the bias is added with one rounding at most (VDPBF16PS may round once
// per pair). Also: the result really is bf16's (the f32 product of the
// unrounded operands is further away), a split of the column groups and
// another batch give the same bits, and nothing is written past a row's N
// columns.
#include "kernels/gemm/bf16_gemm.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "attn/ops/precision.h"
#include "testing.h"

using namespace attn;
using namespace attn::detail;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  std::int64_t M, K, N, ldx;
  std::vector<std::uint16_t> x, w;  // bf16 bits; x with ldx per row
  std::vector<float> xf, wf, b;  // the unrounded values
  std::vector<std::uint16_t> packed;
};

Case random_case(std::int64_t M, std::int64_t K, std::int64_t N, std::int64_t pad,
                 std::mt19937& gen) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Case c{M, K, N, K + (K & 1) + pad, {}, {}, {}, {}, {}, {}};
  c.xf.resize(static_cast<std::size_t>(M * K));
  c.wf.resize(static_cast<std::size_t>(N * K));
  c.b.resize(static_cast<std::size_t>(N));
  for (auto& v : c.xf) v = u(gen);
  for (auto& v : c.wf) v = u(gen);
  for (auto& v : c.b) v = u(gen);
  // Rows ldx apart; the values after a row's K are zeros.
  c.x.assign(static_cast<std::size_t>(M * c.ldx), 0);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t k = 0; k < K; ++k) c.x[m * c.ldx + k] = to_bf16_reference(c.xf[m * K + k]);
  c.w.resize(c.wf.size());
  for (std::size_t i = 0; i < c.wf.size(); ++i) c.w[i] = to_bf16_reference(c.wf[i]);
  c.packed.resize(static_cast<std::size_t>(bf16_gemm_packed_size(N, K)));
  pack_bf16_gemm(c.w.data(), N, K, K, 1, c.packed.data());
  return c;
}

Bf16GemmArgs args(const Case& c, const float* bias, bool relu, float* y) {
  return {.x = c.x.data(),
          .ldx = c.ldx,
          .packed = c.packed.data(),
          .bias = bias,
          .relu = relu,
          .M = c.M,
          .K = c.K,
          .N = c.N,
          .y = y};
}

// Element (m, n) in double from the bf16 values (or the unrounded ones),
// and its scale sum |x||w| + |b|.
void reference(const Case& c, std::int64_t m, std::int64_t n, const float* bias, bool relu,
               bool rounded, double& value, double& scale) {
  value = 0;
  scale = 0;
  for (std::int64_t k = 0; k < c.K; ++k) {
    const double xv = rounded ? from_bf16(c.x[m * c.ldx + k]) : c.xf[m * c.K + k];
    const double wv = rounded ? from_bf16(c.w[n * c.K + k]) : c.wf[n * c.K + k];
    value += xv * wv;
    scale += std::fabs(xv * wv);
  }
  if (bias) {
    value += bias[n];
    scale += std::fabs(bias[n]);
  }
  if (relu && value < 0) value = 0;
}

class Bf16Gemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!bf16_gemm_supported()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  }
};

TEST_F(Bf16Gemm, KernelWithinTheBoundOfTheDoubleProductOnOddSizes) {
  std::mt19937 gen(11);
  int cases = 0;
  double worst = 0;
  for (std::int64_t M : {1, 2, 3, 5, 7, 11, 12, 13, 25, 37, 49, 64})
    for (std::int64_t K : {1, 2, 3, 31, 256, 1027})
      for (std::int64_t N : {1, 15, 17, 33, 100}) {
        const Case c = random_case(M, K, N, M % 3 == 0 ? 4 : 0, gen);
        const double bound = (K + 2) * std::ldexp(1.0, -24);
        for (int variant = 0; variant < 4; ++variant) {
          const float* bias = variant & 1 ? c.b.data() : nullptr;
          const bool relu = (variant & 2) != 0;
          SCOPED_TRACE(::testing::Message()
                       << "M " << M << ", K " << K << ", N " << N << ", ldx " << c.ldx
                       << (bias ? ", bias" : "") << (relu ? ", relu" : ""));
          const float guard = std::numeric_limits<float>::quiet_NaN();
          std::vector<float> got(static_cast<std::size_t>(M * N + 32), guard);
          const std::int64_t groups = (N + 31) / 32;
          bf16_gemm(args(c, bias, relu, got.data()), 0, groups);
          for (std::size_t i = static_cast<std::size_t>(M * N); i < got.size(); ++i)
            ASSERT_TRUE(std::isnan(got[i])) << "written past the end at " << i;
          got.resize(static_cast<std::size_t>(M * N));
          for (std::int64_t m = 0; m < M; ++m)
            for (std::int64_t n = 0; n < N; ++n) {
              double value, scale;
              reference(c, m, n, bias, relu, true, value, scale);
              const double off = std::fabs(got[m * N + n] - value);
              ASSERT_LE(off, bound * scale + 1e-30) << "element " << m << ", " << n;
              if (scale > 0) worst = std::max(worst, off / scale / std::ldexp(1.0, -24));
            }
          // Column groups split over two calls (as threads share them out).
          if (groups > 1) {
            std::vector<float> split(static_cast<std::size_t>(M * N), guard);
            const Bf16GemmArgs a = args(c, bias, relu, split.data());
            bf16_gemm(a, 0, 1);
            bf16_gemm(a, 1, groups);
            EXPECT_TRUE(same_bits(split, got));
          }
          ++cases;
        }
      }
  EXPECT_EQ(cases, 12 * 6 * 5 * 4);
  std::printf("  largest error: %.1f x 2^-24 of |x||W|+|b|\n", worst);
}

// The operands really are rounded to bf16: against the unrounded operands'
// product, the kernel is further off than the bound, and a row's result is
// the same bits whichever rows share its batch.
TEST_F(Bf16Gemm, RoundedOperandsAndRowsIndependent) {
  std::mt19937 gen(12);
  const Case c = random_case(30, 256, 70, 0, gen);
  std::vector<float> y(static_cast<std::size_t>(30 * 70));
  bf16_gemm(args(c, c.b.data(), false, y.data()), 0, 3);
  double far = 0;
  for (std::int64_t n = 0; n < 70; ++n) {
    double value, scale;
    reference(c, 4, n, c.b.data(), false, false, value, scale);
    far = std::max(far, std::fabs(y[4 * 70 + n] - value) / scale);
  }
  EXPECT_GT(far, 258 * std::ldexp(1.0, -24));
  // Row 4 alone (a batch of one row) gives the same bits as in the batch.
  Case one = c;
  one.M = 1;
  one.x.assign(c.x.begin() + 4 * c.ldx, c.x.begin() + 5 * c.ldx);
  std::vector<float> y1(70);
  bf16_gemm(args(one, c.b.data(), false, y1.data()), 0, 3);
  EXPECT_TRUE(same_bits(y1, std::vector<float>(y.begin() + 4 * 70, y.begin() + 5 * 70)));
}

// The layout read through strides: W's transpose in memory gives the same
// packed values as W; pairs of k share a 32-bit lane, low half first; the
// steps after the last group are zeros.
TEST(Bf16GemmLayout, PackingThroughStrides) {
  const std::int64_t N = 45, K = 7;
  std::vector<std::uint16_t> w(static_cast<std::size_t>(N * K)), wt(w.size());
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < K; ++k) {
      w[n * K + k] = static_cast<std::uint16_t>(n * 100 + k);
      wt[k * N + n] = w[n * K + k];
    }
  std::vector<std::uint16_t> a(static_cast<std::size_t>(bf16_gemm_packed_size(N, K))), b(a.size());
  pack_bf16_gemm(w.data(), N, K, K, 1, a.data());
  pack_bf16_gemm(wt.data(), N, K, 1, N, b.data());
  EXPECT_EQ(a, b);
  // Two groups of 32 columns, 4 steps (k pairs) each, then 32 steps.
  ASSERT_EQ(a.size(), std::size_t((2 * 4 + 32) * 32 * 2));
  // Column 40 (group 1, lane 8), k 5: step 2, high half.
  EXPECT_EQ(a[((1 * 4 + 2) * 32 + 8) * 2 + 1], 4005);
  EXPECT_EQ(a[((1 * 4 + 2) * 32 + 8) * 2 + 0], 4004);
  EXPECT_EQ(a[((1 * 4 + 3) * 32 + 8) * 2 + 1], 0);  // k 7: past K
  EXPECT_EQ(a[((1 * 4 + 2) * 32 + 13) * 2], 0);  // column 45: past N
  for (std::size_t i = 2 * 4 * 32 * 2; i < a.size(); ++i) ASSERT_EQ(a[i], 0) << i;
}

}  // namespace
