// The few-row int8 product (src/kernels/gemm/int8_gemm.h): the AVX-512 VNNI,
// AVX-VNNI and AVX2 kernels against their plain references, bit for bit, on
// random operands of odd sizes (every tile height, partial column groups, K
// not a multiple of 4, rows further apart than K), with and without a bias,
// and on the extreme operands (every |value| 127) where a u8 x s8 pair would
// saturate int16; a split of the column groups gives the same results;
// nothing is written past a row's N columns; the rows are read no further
// than the 3 bytes past the last one that the header allows
// (AddressSanitizer checks the buffer's end). The AVX2 kernel takes 7-bit
// rows (u in [0, 127]) and the same reference, and is exact where its pairs
// of products are largest.
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
// the largest pairs of products there are. `u7`: the AVX2 kernel's 7-bit
// operands, u in [0, 127] and Wq in [-63, 63] (extreme: 0 or 127, -63 or
// 63), comp 64 sum_k Wq.
Operands random_operands(std::int64_t M, std::int64_t K, std::int64_t N, std::int64_t ldu,
                         std::mt19937& gen, bool extreme = false, bool u7 = false) {
  Operands o;
  const int top = u7 ? 127 : 255, bottom = u7 ? 0 : 1, offset = u7 ? 64 : 128;
  const int wmax = u7 ? 63 : 127;
  std::uniform_int_distribution<int> u8(bottom, top), s8(-wmax, wmax), coin(0, 1);
  std::uniform_real_distribution<float> scale(1e-3f, 0.05f), b(-2.0f, 2.0f);
  // The last row ends 3 bytes past its K values: the most the kernel reads.
  o.u.resize(static_cast<std::size_t>((M - 1) * ldu + K + 3));
  for (auto& v : o.u) v = static_cast<std::uint8_t>(extreme ? (coin(gen) ? top : bottom) : u8(gen));
  o.wq.resize(static_cast<std::size_t>(N * K));
  for (auto& v : o.wq) v = static_cast<std::int8_t>(extreme ? (coin(gen) ? wmax : -wmax) : s8(gen));
  o.comp.assign(static_cast<std::size_t>(N), 0);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < K; ++k) o.comp[n] += offset * o.wq[n * K + k];
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

using Kernel = void (*)(const Int8GemmArgs&, std::int64_t, std::int64_t);

// `kernel` against the reference, bit for bit, on random operands of every
// block and tile height (1 to 64 rows), partial column groups and halves of
// 16, K not a multiple of 4, rows further apart than K, with and without a
// bias, random and (up to 13 rows) extreme; a split of the column groups
// over two calls gives the same results; nothing is written past the end.
// Returns the cases run.
int check_odd_sizes(Kernel kernel, std::uint32_t seed, bool u7) {
  std::mt19937 gen(seed);
  int cases = 0;
  for (bool extreme : {false, true})
    for (std::int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 23, 25, 32, 37, 64})
      for (std::int64_t K : {1, 3, 4, 6, 63, 256, 1027})
        for (std::int64_t N : {1, 7, 8, 9, 15, 16, 17, 33, 100}) {
          if (extreme && M > 13) continue;
          const std::int64_t ldx = K + (M % 3 == 0 ? 5 : 0);
          Operands o = random_operands(M, K, N, ldx, gen, extreme, u7);
          const std::vector<std::int8_t> packed = pack_int8_gemm(o.wq.data(), N, K);
          for (bool with_bias : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << "M " << M << ", K " << K << ", N " << N << ", ldx " << ldx
                         << (with_bias ? ", bias" : "") << (extreme ? ", extreme" : ""));
            // A guard after y's M x N values: masked stores leave it alone.
            const float guard = std::numeric_limits<float>::quiet_NaN();
            std::vector<float> ref(static_cast<std::size_t>(M * N));
            std::vector<float> got(static_cast<std::size_t>(M * N + 32), guard);
            int8_gemm_reference(args(o, packed, with_bias, M, K, N, ldx, ref.data()), o.wq.data());
            const std::int64_t groups = (N + 31) / 32;
            kernel(args(o, packed, with_bias, M, K, N, ldx, got.data()), 0, groups);
            for (std::size_t i = static_cast<std::size_t>(M * N); i < got.size(); ++i)
              EXPECT_TRUE(std::isnan(got[i])) << "written past the end at " << i;
            got.resize(static_cast<std::size_t>(M * N));
            EXPECT_TRUE(same_bits(got, ref));
            // Column groups split over two calls (as threads share them out).
            if (groups > 1) {
              std::vector<float> split(static_cast<std::size_t>(M * N), guard);
              const Int8GemmArgs a = args(o, packed, with_bias, M, K, N, ldx, split.data());
              kernel(a, 0, 1);
              kernel(a, 1, groups);
              EXPECT_TRUE(same_bits(split, ref));
            }
            ++cases;
          }
        }
  return cases;
}

constexpr int kOddSizeCases = (17 * 7 * 9 + 12 * 7 * 9) * 2;

// The AVX-512 VNNI kernel on 8-bit operands (extreme: every |value| 127).
TEST(Int8Gemm, KernelEqualsReferenceOnRandomOperandsOfOddSizes) {
  if (int8_kernel() != Int8Kernel::avx512_vnni)
    GTEST_SKIP() << "this CPU has no AVX-512 VNNI (or ATTN_NO_VNNI=1)";
  EXPECT_EQ(check_odd_sizes(int8_gemm, 5, false), kOddSizeCases);
}

// The AVX-VNNI kernel on the same operands, wherever the CPU has AVX-VNNI
// (also where the AVX-512 kernel runs instead).
TEST(Int8Gemm, AvxVnniKernelEqualsReferenceOnRandomOperandsOfOddSizes) {
  if (!int8_gemm_avx_vnni_cpu()) GTEST_SKIP() << "this CPU has no AVX-VNNI";
  EXPECT_EQ(check_odd_sizes(int8_gemm_avx_vnni, 9, false), kOddSizeCases);
}

// The AVX2 kernel on 7-bit operands; extreme: u 0 or 127, Wq -63 or 63,
// where a pair of products reaches 2 x 127 x 63 = 16002 in magnitude and
// two steps' pairs 32004, the most its int16 sums hold
// (kernels/gemm/int8_gemm.h).
TEST(Int8Gemm, Avx2KernelEqualsReferenceOnRandomOperandsOfOddSizes) {
  if (!int8_gemm_avx2_cpu()) GTEST_SKIP() << "this CPU has no AVX2";
  EXPECT_EQ(check_odd_sizes(int8_gemm_avx2, 7, true), kOddSizeCases);
}

// The largest pairs, by hand: u 127 (xq 63) against Wq 63 and -63, and
// u 0 (xq -64), give the exact sums: K x 63 x 63 in magnitude, and
// K x 64 x 63; the int16 sums of two steps reach 4 x 127 x 63 = 32004.
TEST(Int8Gemm, Avx2KernelIsExactAtTheLargestPairs) {
  if (!int8_gemm_avx2_cpu()) GTEST_SKIP() << "this CPU has no AVX2";
  constexpr std::int64_t K = 1024;
  std::vector<std::uint8_t> u(2 * K + 3, 127);
  std::vector<std::int8_t> wq(2 * K, 63);
  for (std::int64_t k = 0; k < K; ++k) {
    wq[K + k] = -63;  // weight row 1
    u[K + k] = 0;  // activation row 1: xq -64
  }
  const std::vector<std::int8_t> packed = pack_int8_gemm(wq.data(), 2, K);
  const std::int32_t comp[] = {64 * 63 * K, -64 * 63 * K};
  const float sx[] = {1.0f, 1.0f}, sw[] = {1.0f, 1.0f};
  float y[4];
  const Int8GemmArgs a{.x = u.data(),
                       .ldx = K,
                       .sx = sx,
                       .packed = packed.data(),
                       .comp = comp,
                       .sw = sw,
                       .bias = nullptr,
                       .M = 2,
                       .K = K,
                       .N = 2,
                       .y = y};
  int8_gemm_avx2(a, 0, 1);
  const float high = static_cast<float>(K * 63 * 63), low = static_cast<float>(K * 64 * 63);
  EXPECT_EQ(y[0], high);
  EXPECT_EQ(y[1], -high);
  EXPECT_EQ(y[2], -low);
  EXPECT_EQ(y[3], low);
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
  // The AVX2 kernel on 7-bit operands (u = xq + 64, |Wq| <= 63) and comp
  // 64 sum_k Wq.
  if (int8_gemm_avx2_cpu()) {
    const std::uint8_t u7[] = {66, 56, 64, 127, 0, 0, 0};  // xq = 2, -8, 0, 63
    const std::int8_t wq7[] = {1, 2, 3, 4, -1, 0, 0, 63};
    const std::int32_t comp7[] = {64 * 10, 64 * 62};
    const std::vector<std::int8_t> packed = pack_int8_gemm(wq7, 2, 4);
    a.x = u7;
    a.comp = comp7;
    a.packed = packed.data();
    float k[2];
    a.y = k;
    int8_gemm_avx2(a, 0, 1);
    // 2 - 16 + 0 + 252 = 238; -2 + 0 + 0 + 63 * 63 = 3967.
    EXPECT_EQ(k[0], 238.0f * 1.0f + 0.25f);
    EXPECT_EQ(k[1], 3967.0f * 0.5f - 1.0f);
  }
}

}  // namespace
