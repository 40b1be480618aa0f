// The few-row int8 product (src/kernels/gemm/int8_gemm.h): the AVX-512 VNNI kernel
// and the AVX2 kernel against their plain references, bit for bit, on
// random operands of odd sizes (every tile height, partial column groups, K
// not a multiple of 4, rows further apart than K), with and without a bias,
// and on the extreme operands (every |value| 127) where a u8 x s8 pair would
// saturate int16; a split of the column groups gives the same results;
// nothing is written past a row's N columns; the rows are read no further
// than the 3 bytes past the last one that the header allows
// (AddressSanitizer checks the buffer's end). The AVX2 kernel's reference
// gives the VNNI reference's bits on the same numbers (xq = u - 128).
#include "kernels/gemm/int8_gemm.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "attn/ops/quantize.h"
#include "testing.h"

using namespace attn;
using namespace attn::detail;

namespace {

struct Operands {
  std::vector<std::uint8_t> u;
  std::vector<float> sx, sw, bias;
  std::vector<std::int8_t> wq;
  std::vector<std::int32_t> comp;
};

// Random operands; `extreme`: every xq and Wq is -127 or 127 (u 1 or 255),
// the largest pairs of products there are.
Operands random_operands(std::int64_t M, std::int64_t K, std::int64_t N, std::int64_t ldu,
                         std::mt19937& gen, bool extreme = false) {
  Operands o;
  std::uniform_int_distribution<int> u8(1, 255), s8(-127, 127), coin(0, 1);
  std::uniform_real_distribution<float> scale(1e-3f, 0.05f), b(-2.0f, 2.0f);
  // The last row ends 3 bytes past its K values: the most the kernel reads.
  o.u.resize(static_cast<std::size_t>((M - 1) * ldu + K + 3));
  for (auto& v : o.u) v = static_cast<std::uint8_t>(extreme ? (coin(gen) ? 255 : 1) : u8(gen));
  o.wq.resize(static_cast<std::size_t>(N * K));
  for (auto& v : o.wq) v = static_cast<std::int8_t>(extreme ? (coin(gen) ? 127 : -127) : s8(gen));
  o.comp.assign(static_cast<std::size_t>(N), 0);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < K; ++k) o.comp[n] += 128 * o.wq[n * K + k];
  for (std::int64_t m = 0; m < M; ++m) o.sx.push_back(scale(gen));
  for (std::int64_t n = 0; n < N; ++n) {
    o.sw.push_back(scale(gen));
    o.bias.push_back(b(gen));
  }
  return o;
}

Int8GemmArgs args(const Operands& o, const std::vector<std::int8_t>& packed, bool with_bias,
                  std::int64_t M, std::int64_t K, std::int64_t N, std::int64_t ldu, float* y) {
  return {.x = o.u.data(),
          .ldx = ldu,
          .sx = o.sx.data(),
          .packed = packed.data(),
          .comp = o.comp.data(),
          .sw = o.sw.data(),
          .bias = with_bias ? o.bias.data() : nullptr,
          .M = M,
          .K = K,
          .N = N,
          .y = y};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The AVX2 kernel's operands: the rows as s8 (xq = u - 128), the same
// layout and spare bytes.
std::vector<std::int8_t> signed_rows(const Operands& o) {
  std::vector<std::int8_t> x(o.u.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::int8_t>(o.u[i] - 128);
  return x;
}

Int8GemmS8Args s8_args(const Operands& o, const std::vector<std::int8_t>& x,
                       const std::vector<std::int8_t>& packed, const std::vector<std::int32_t>& neg,
                       bool with_bias, std::int64_t M, std::int64_t K, std::int64_t N,
                       std::int64_t ldx, float* y) {
  return {.x = x.data(),
          .ldx = ldx,
          .sx = o.sx.data(),
          .packed = packed.data(),
          .neg = neg.data(),
          .sw = o.sw.data(),
          .bias = with_bias ? o.bias.data() : nullptr,
          .M = M,
          .K = K,
          .N = N,
          .y = y};
}

TEST(Int8Gemm, KernelEqualsReferenceOnRandomOperandsOfOddSizes) {
  if (int8_kernel() != Int8Kernel::avx512_vnni)
    GTEST_SKIP() << "this CPU has no AVX-512 VNNI (or ATTN_NO_VNNI=1)";
  std::mt19937 gen(5);
  int cases = 0;
  for (std::int64_t M : {1, 2, 3, 5, 7, 11, 12, 13, 23, 25, 32, 37, 64})
    for (std::int64_t K : {1, 3, 4, 6, 63, 256, 1027})
      for (std::int64_t N : {1, 15, 16, 17, 33, 100}) {
        const std::int64_t ldu = K + (M % 3 == 0 ? 5 : 0);
        Operands o = random_operands(M, K, N, ldu, gen);
        const std::vector<std::int8_t> packed = pack_int8_gemm(o.wq.data(), N, K);
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "M " << M << ", K " << K << ", N " << N << ", ldu "
                                            << ldu << (with_bias ? ", bias" : ""));
          // A guard after y's M x N values: masked stores leave it alone.
          const float guard = std::numeric_limits<float>::quiet_NaN();
          std::vector<float> ref(static_cast<std::size_t>(M * N));
          std::vector<float> got(static_cast<std::size_t>(M * N + 32), guard);
          int8_gemm_reference(args(o, packed, with_bias, M, K, N, ldu, ref.data()), o.wq.data());
          const std::int64_t groups = (N + 31) / 32;
          int8_gemm(args(o, packed, with_bias, M, K, N, ldu, got.data()), 0, groups);
          for (std::size_t i = static_cast<std::size_t>(M * N); i < got.size(); ++i)
            ASSERT_TRUE(std::isnan(got[i])) << "written past the end at " << i;
          got.resize(static_cast<std::size_t>(M * N));
          EXPECT_TRUE(same_bits(got, ref));
          // Column groups split over two calls (as threads share them out).
          if (groups > 1) {
            std::vector<float> split(static_cast<std::size_t>(M * N), guard);
            const Int8GemmArgs a = args(o, packed, with_bias, M, K, N, ldu, split.data());
            int8_gemm(a, 0, 1);
            int8_gemm(a, 1, groups);
            EXPECT_TRUE(same_bits(split, ref));
          }
          ++cases;
        }
      }
  EXPECT_EQ(cases, 13 * 7 * 6 * 2);
}

// The AVX2 kernel against its reference and the VNNI reference, bit for
// bit, on the same sizes, and on extreme operands: there a pair of u8 x s8
// products reaches 2 x 255 x 127 = 64770, which vpmaddubsw would saturate;
// the kernel's pairs (|Wq| times xq, flipped where Wq < 0) stay at most
// 2 x 127 x 128 = 32512.
TEST(Int8Gemm, Avx2KernelEqualsReferenceOnRandomOperandsOfOddSizes) {
  if (!int8_gemm_avx2_cpu()) GTEST_SKIP() << "this CPU has no AVX2";
  std::mt19937 gen(7);
  int cases = 0;
  for (bool extreme : {false, true})
    for (std::int64_t M : {1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13, 23, 25, 32, 37, 64})
      for (std::int64_t K : {1, 3, 4, 6, 63, 256, 1027})
        for (std::int64_t N : {1, 7, 8, 9, 15, 16, 17, 33, 100}) {
          if (extreme && M > 13) continue;
          const std::int64_t ldx = K + (M % 3 == 0 ? 5 : 0);
          Operands o = random_operands(M, K, N, ldx, gen, extreme);
          const std::vector<std::int8_t> x = signed_rows(o);
          const std::vector<std::int8_t> packed = pack_int8_gemm(o.wq.data(), N, K);
          std::vector<std::int32_t> neg(static_cast<std::size_t>(N));
          int8_gemm_neg(o.wq.data(), N, K, neg.data());
          for (bool with_bias : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << "M " << M << ", K " << K << ", N " << N << ", ldx " << ldx
                         << (with_bias ? ", bias" : "") << (extreme ? ", extreme" : ""));
            const float guard = std::numeric_limits<float>::quiet_NaN();
            std::vector<float> ref(static_cast<std::size_t>(M * N));
            std::vector<float> vnni_ref(static_cast<std::size_t>(M * N));
            std::vector<float> got(static_cast<std::size_t>(M * N + 32), guard);
            int8_gemm_s8_reference(s8_args(o, x, packed, neg, with_bias, M, K, N, ldx, ref.data()),
                                   o.wq.data());
            int8_gemm_reference(args(o, packed, with_bias, M, K, N, ldx, vnni_ref.data()),
                                o.wq.data());
            EXPECT_TRUE(same_bits(ref, vnni_ref));
            const std::int64_t groups = (N + 31) / 32;
            int8_gemm_avx2(s8_args(o, x, packed, neg, with_bias, M, K, N, ldx, got.data()), 0,
                           groups);
            for (std::size_t i = static_cast<std::size_t>(M * N); i < got.size(); ++i)
              ASSERT_TRUE(std::isnan(got[i])) << "written past the end at " << i;
            got.resize(static_cast<std::size_t>(M * N));
            EXPECT_TRUE(same_bits(got, ref));
            if (groups > 1) {
              std::vector<float> split(static_cast<std::size_t>(M * N), guard);
              const Int8GemmS8Args a =
                  s8_args(o, x, packed, neg, with_bias, M, K, N, ldx, split.data());
              int8_gemm_avx2(a, 0, 1);
              int8_gemm_avx2(a, 1, groups);
              EXPECT_TRUE(same_bits(split, ref));
            }
            ++cases;
          }
        }
  EXPECT_EQ(cases, (16 * 7 * 9 + 11 * 7 * 9) * 2);
}

// The extreme operands the flips are for: pairs that would saturate
// vpmaddubsw on u8 activations (x 127, u 255; Wq 127), and the largest
// flipped ones (Wq -127 with x -127 and 127: |Wq| times 126 and -128),
// give the exact sums, K x 127 x 127 in magnitude.
TEST(Int8Gemm, Avx2KernelIsExactWhereU8PairsWouldSaturate) {
  if (!int8_gemm_avx2_cpu()) GTEST_SKIP() << "this CPU has no AVX2";
  constexpr std::int64_t K = 1024;
  std::vector<std::int8_t> x(2 * K + 3, 127), wq(2 * K, 127);
  for (std::int64_t k = 0; k < K; ++k) {
    wq[K + k] = -127;  // weight row 1: every product with row 0 -16129
    x[K + k] = -127;  // activation row 1: with weight row 1, every product 16129
  }
  const std::vector<std::int8_t> packed = pack_int8_gemm(wq.data(), 2, K);
  std::vector<std::int32_t> neg(2);
  int8_gemm_neg(wq.data(), 2, K, neg.data());
  const float sx[] = {1.0f, 1.0f}, sw[] = {1.0f, 1.0f};
  float y[4];
  const Int8GemmS8Args a{.x = x.data(),
                         .ldx = K,
                         .sx = sx,
                         .packed = packed.data(),
                         .neg = neg.data(),
                         .sw = sw,
                         .bias = nullptr,
                         .M = 2,
                         .K = K,
                         .N = 2,
                         .y = y};
  int8_gemm_avx2(a, 0, 1);
  const float big = static_cast<float>(K * 127 * 127);
  EXPECT_EQ(y[0], big);
  EXPECT_EQ(y[1], -big);
  EXPECT_EQ(y[2], -big);
  EXPECT_EQ(y[3], big);
}

// The reference itself, on a product worked by hand: acc = sum u w - comp,
// y = acc * sx * sw + b.
TEST(Int8Gemm, ReferenceByHand) {
  const std::uint8_t u[] = {130, 120, 128, 255, 0, 0, 0};  // xq = 2, -8, 0, 127 (+ 3 spare)
  const std::int8_t wq[] = {1, 2, 3, 4, -1, 0, 0, 127};  // 2 rows of K = 4
  const std::int32_t comp[] = {128 * 10, 128 * 126};
  const float sx[] = {0.5f}, sw[] = {2.0f, 1.0f}, bias[] = {0.25f, -1.0f};
  float y[2];
  Int8GemmArgs a{};
  a.x = u;
  a.ldx = 4;
  a.sx = sx;
  a.comp = comp;
  a.sw = sw;
  a.bias = bias;
  a.M = 1;
  a.K = 4;
  a.N = 2;
  a.y = y;
  int8_gemm_reference(a, wq);
  // xq . w: 2 - 16 + 0 + 508 = 494; -2 + 0 + 0 + 127 * 127 = 16127.
  EXPECT_EQ(y[0], 494.0f * 1.0f + 0.25f);
  EXPECT_EQ(y[1], 16127.0f * 0.5f - 1.0f);
  // The s8 reference on the same numbers (xq = u - 128).
  const std::int8_t xq[] = {2, -8, 0, 127, 0, 0, 0};
  std::int32_t neg[2];
  int8_gemm_neg(wq, 2, 4, neg);
  EXPECT_EQ(neg[0], 0);
  EXPECT_EQ(neg[1], -1);
  Int8GemmS8Args b{};
  b.x = xq;
  b.ldx = 4;
  b.sx = sx;
  b.sw = sw;
  b.bias = bias;
  b.neg = neg;
  b.M = 1;
  b.K = 4;
  b.N = 2;
  float z[2];
  b.y = z;
  int8_gemm_s8_reference(b, wq);
  EXPECT_EQ(z[0], y[0]);
  EXPECT_EQ(z[1], y[1]);
  if (int8_gemm_avx2_cpu()) {  // the kernel on the same numbers
    const std::vector<std::int8_t> packed = pack_int8_gemm(wq, 2, 4);
    b.packed = packed.data();
    float k[2];
    b.y = k;
    int8_gemm_avx2(b, 0, 1);
    EXPECT_EQ(k[0], y[0]);
    EXPECT_EQ(k[1], y[1]);
  }
}

}  // namespace
