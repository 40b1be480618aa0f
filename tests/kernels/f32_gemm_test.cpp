// The f32 product of a frozen weight (src/kernels/gemm/f32_gemm.h): the AVX-512 and
// AVX2 kernels (each that this CPU has) against their plain reference, bit
// for bit (the same fused
// multiply-adds in the same order), on random operands of odd sizes (every
// tile height, more than one chunk of tiles, partial column groups, rows
// further apart than K, a weight read through strides), with and without a
// bias and the ReLU; a split of the column groups gives the same results;
// nothing is written past a row's N columns; NaN and infinities pass the
// ReLU as the reference's comparison does; and the reference against a sum
// worked by hand.
#include "kernels/gemm/f32_gemm.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "testing.h"

using namespace attn::detail;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

F32GemmArgs args(const std::vector<float>& x, std::int64_t ldx, const std::vector<float>& packed,
                 const float* bias, bool relu, std::int64_t M, std::int64_t K, std::int64_t N,
                 float* y) {
  return {.x = x.data(),
          .ldx = ldx,
          .packed = packed.data(),
          .bias = bias,
          .relu = relu,
          .M = M,
          .K = K,
          .N = N,
          .y = y};
}

std::vector<float> packed_of(const std::vector<float>& w, std::int64_t N, std::int64_t K) {
  std::vector<float> p(static_cast<std::size_t>(f32_gemm_packed_size(N, K)));
  pack_f32_gemm(w.data(), N, K, K, 1, p.data());
  return p;
}

// The instruction sets of the kernel this CPU has.
std::vector<F32GemmIsa> isas() {
  std::vector<F32GemmIsa> v;
  for (F32GemmIsa isa : {F32GemmIsa::avx512, F32GemmIsa::avx2})
    if (f32_gemm_cpu_has(isa)) v.push_back(isa);
  return v;
}

const char* isa_name(F32GemmIsa isa) { return isa == F32GemmIsa::avx512 ? "avx512" : "avx2"; }

TEST(F32Gemm, KernelEqualsReferenceOnRandomOperandsOfOddSizes) {
  if (isas().empty()) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2 with FMA";
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  int cases = 0;
  for (std::int64_t M : {1, 2, 3, 5, 7, 11, 12, 13, 23, 25, 32, 37, 49, 64, 101})
    for (std::int64_t K : {1, 2, 31, 33, 256, 1027})
      for (std::int64_t N : {1, 15, 16, 17, 33, 100}) {
        const std::int64_t ldx = K + (M % 3 == 0 ? 5 : 0);
        std::vector<float> x(static_cast<std::size_t>((M - 1) * ldx + K)),
            w(static_cast<std::size_t>(N * K)), b(static_cast<std::size_t>(N));
        for (auto& v : x) v = u(gen);
        for (auto& v : w) v = u(gen);
        for (auto& v : b) v = u(gen);
        const std::vector<float> packed = packed_of(w, N, K);
        for (int variant = 0; variant < 4; ++variant) {
          const float* bias = variant & 1 ? b.data() : nullptr;
          const bool relu = (variant & 2) != 0;
          SCOPED_TRACE(::testing::Message()
                       << "M " << M << ", K " << K << ", N " << N << ", ldx " << ldx
                       << (bias ? ", bias" : "") << (relu ? ", relu" : ""));
          // A guard after y's M x N values: masked stores leave it alone.
          const float guard = std::numeric_limits<float>::quiet_NaN();
          std::vector<float> ref(static_cast<std::size_t>(M * N));
          f32_gemm_reference(args(x, ldx, packed, bias, relu, M, K, N, ref.data()), w.data());
          const std::int64_t groups = (N + 31) / 32;
          for (F32GemmIsa isa : isas()) {
            SCOPED_TRACE(isa_name(isa));
            std::vector<float> got(static_cast<std::size_t>(M * N + 32), guard);
            f32_gemm_on(isa, args(x, ldx, packed, bias, relu, M, K, N, got.data()), 0, groups);
            for (std::size_t i = static_cast<std::size_t>(M * N); i < got.size(); ++i)
              ASSERT_TRUE(std::isnan(got[i])) << "written past the end at " << i;
            got.resize(static_cast<std::size_t>(M * N));
            EXPECT_TRUE(same_bits(got, ref));
            // Column groups split over two calls (as threads share them out).
            if (groups > 1) {
              std::vector<float> split(static_cast<std::size_t>(M * N), guard);
              const F32GemmArgs a = args(x, ldx, packed, bias, relu, M, K, N, split.data());
              f32_gemm_on(isa, a, 0, 1);
              f32_gemm_on(isa, a, 1, groups);
              EXPECT_TRUE(same_bits(split, ref));
            }
          }
          ++cases;
        }
      }
  EXPECT_EQ(cases, 15 * 6 * 6 * 4);
}

// The tiles f32_gemm runs: the best the CPU has, capped by ATTN_ISA (the
// portable build's test passes set it to avx2 and portable).
TEST(F32Gemm, IsaFollowsTheCpuAndAttnIsa) {
  const char* env = std::getenv("ATTN_ISA");
  const std::string cap = env ? env : "";
  F32GemmIsa want = F32GemmIsa::none;
  if (cap != "portable" && cap != "avx2" && f32_gemm_cpu_has(F32GemmIsa::avx512))
    want = F32GemmIsa::avx512;
  else if (cap != "portable" && f32_gemm_cpu_has(F32GemmIsa::avx2))
    want = F32GemmIsa::avx2;
  EXPECT_EQ(f32_gemm_isa(), want) << "ATTN_ISA=" << cap;
  EXPECT_EQ(f32_gemm_supported(), want != F32GemmIsa::none);
}

// The layout read through strides: W's transpose in memory gives the same
// packed floats as W.
TEST(F32Gemm, PackingThroughStrides) {
  const std::int64_t N = 45, K = 7;
  std::vector<float> w(static_cast<std::size_t>(N * K)), wt(w.size());
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < K; ++k) {
      w[n * K + k] = static_cast<float>(n * 100 + k);
      wt[k * N + n] = w[n * K + k];
    }
  // NaN first: every float of the layout must be written.
  std::vector<float> a(static_cast<std::size_t>(f32_gemm_packed_size(N, K)),
                       std::numeric_limits<float>::quiet_NaN()),
      b(a);
  pack_f32_gemm(w.data(), N, K, K, 1, a.data());
  pack_f32_gemm(wt.data(), N, K, 1, N, b.data());
  EXPECT_TRUE(same_bits(a, b));
  // Two groups of 32 columns, K steps each, then 32 steps of zeros; column
  // 40 is group 1's 9th.
  ASSERT_EQ(a.size(), std::size_t((2 * K + 32) * 32));
  for (std::size_t i = 2 * K * 32; i < a.size(); ++i) ASSERT_EQ(a[i], 0.0f) << i;
  EXPECT_EQ(a[(1 * K + 3) * 32 + 8], 4003.0f);
  EXPECT_EQ(a[(1 * K + 3) * 32 + 13], 0.0f);  // column 45: past N
}

// Special values: NaN stays NaN through the bias and the ReLU, -inf becomes 0
// and +inf stays, and a sum of zeros is +0 (the sums start from +0, so no -0
// reaches the ReLU); the kernel agrees bit for bit.
TEST(F32Gemm, SpecialValuesThroughTheRelu) {
  const std::int64_t M = 1, K = 2, N = 5;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1.0f, 1.0f};
  // Rows of W: sums NaN, +0 (of -0 terms, and a -0 bias), -inf, +inf, -3.
  const std::vector<float> w = {std::nanf(""), 0.0f, -0.0f, -0.0f, -inf,
                                1.0f,          inf,  1.0f,  -1.0f, -2.0f};
  const std::vector<float> b = {0.0f, -0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> ref(static_cast<std::size_t>(N));
  const std::vector<float> packed = packed_of(w, N, K);
  f32_gemm_reference(args(x, K, packed, b.data(), true, M, K, N, ref.data()), w.data());
  EXPECT_TRUE(std::isnan(ref[0]));
  EXPECT_TRUE(ref[1] == 0.0f && !std::signbit(ref[1]));
  EXPECT_EQ(ref[2], 0.0f);
  EXPECT_EQ(ref[3], inf);
  EXPECT_EQ(ref[4], 0.0f);
  if (isas().empty()) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2 with FMA";
  for (F32GemmIsa isa : isas()) {
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> got(static_cast<std::size_t>(N));
    f32_gemm_on(isa, args(x, K, packed, b.data(), true, M, K, N, got.data()), 0, 1);
    EXPECT_TRUE(same_bits(got, ref));
  }
}

// The reference on a product worked by hand.
TEST(F32Gemm, ReferenceByHand) {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, -1.0f, 0.5f, 0.0f};  // 2 rows of K = 3
  const std::vector<float> w = {1.0f, 1.0f, 1.0f, 2.0f, 0.0f, -4.0f};  // 2 rows of K = 3
  const std::vector<float> b = {0.5f, -1.0f};
  const std::vector<float> packed = packed_of(w, 2, 3);
  std::vector<float> y(4);
  f32_gemm_reference(args(x, 3, packed, b.data(), false, 2, 3, 2, y.data()), w.data());
  EXPECT_EQ(y, (std::vector<float>{6.5f, -11.0f, 0.0f, -3.0f}));
  f32_gemm_reference(args(x, 3, packed, b.data(), true, 2, 3, 2, y.data()), w.data());
  EXPECT_EQ(y, (std::vector<float>{6.5f, 0.0f, 0.0f, 0.0f}));
}

}  // namespace
