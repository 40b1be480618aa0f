// The few-row int8 product (src/ops/int8_gemm.h): the AVX-512 VNNI kernel
// against its plain reference, bit for bit, on random operands of odd sizes
// (every tile height, partial column groups, K not a multiple of 4, rows
// further apart than K), with and without a bias; a split of the column
// groups gives the same results; nothing is written past a row's N columns;
// the rows are read no further than the 3 bytes past the last one that the
// header allows (AddressSanitizer checks the buffer's end).
#include "ops/int8_gemm.h"

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

Operands random_operands(std::int64_t M, std::int64_t K, std::int64_t N, std::int64_t ldu,
                         std::mt19937& gen) {
  Operands o;
  std::uniform_int_distribution<int> u8(1, 255), s8(-127, 127);
  std::uniform_real_distribution<float> scale(1e-3f, 0.05f), b(-2.0f, 2.0f);
  // The last row ends 3 bytes past its K values: the most the kernel reads.
  o.u.resize(static_cast<std::size_t>((M - 1) * ldu + K + 3));
  for (auto& v : o.u) v = static_cast<std::uint8_t>(u8(gen));
  o.wq.resize(static_cast<std::size_t>(N * K));
  for (auto& v : o.wq) v = static_cast<std::int8_t>(s8(gen));
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
  return {.u = o.u.data(),
          .ldu = ldu,
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

TEST(Int8Gemm, KernelEqualsReferenceOnRandomOperandsOfOddSizes) {
  if (!int8_supported()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
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

// The reference itself, on a product worked by hand: acc = sum u w - comp,
// y = acc * sx * sw + b.
TEST(Int8Gemm, ReferenceByHand) {
  const std::uint8_t u[] = {130, 120, 128, 255, 0, 0, 0};  // xq = 2, -8, 0, 127 (+ 3 spare)
  const std::int8_t wq[] = {1, 2, 3, 4, -1, 0, 0, 127};  // 2 rows of K = 4
  const std::int32_t comp[] = {128 * 10, 128 * 126};
  const float sx[] = {0.5f}, sw[] = {2.0f, 1.0f}, bias[] = {0.25f, -1.0f};
  float y[2];
  Int8GemmArgs a{};
  a.u = u;
  a.ldu = 4;
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
}

}  // namespace
