// One row's int8 quantization (src/kernels/quantize/quantize_rows.h): the AVX2
// kernel (s8, and u8 = xq + 128 for the AVX-VNNI product) and the AVX-512
// one (u8) against the plain reference, bit for bit, scale included, on
// rows of odd lengths (the vector loops' tails) holding what matters to a
// per-row scale: zeros, values below the zero threshold, one huge value,
// exact ties of the rounding, infinities and NaNs in the vector body and in
// the tail.
#include "kernels/quantize/quantize_rows.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/gemm/int8_gemm.h"
#include "testing.h"

using namespace attn::detail;

namespace {

const std::int64_t kLengths[] = {1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 257, 1027};

// The rows of length K the tests quantize.
std::vector<std::vector<float>> odd_rows(std::int64_t K, std::mt19937& gen) {
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  auto random = [&] {
    std::vector<float> r(static_cast<std::size_t>(K));
    for (auto& v : r) v = u(gen);
    return r;
  };
  std::vector<std::vector<float>> rows;
  rows.push_back(random());
  rows.push_back(std::vector<float>(static_cast<std::size_t>(K), 0.0f));
  std::vector<float> tiny = random();
  for (auto& v : tiny) v *= 1e-31f;
  rows.push_back(tiny);
  std::vector<float> huge = random();
  huge[static_cast<std::size_t>(K / 2)] = -1e30f;
  rows.push_back(huge);
  // Ties: amax 127, so x * (127 / amax) is x itself, and k + 0.5 rounds to
  // the even neighbour.
  std::vector<float> ties(static_cast<std::size_t>(K));
  for (std::int64_t k = 0; k < K; ++k) ties[k] = static_cast<float>(k % 9) - 4.5f;
  ties[0] = 127.0f;
  rows.push_back(ties);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const float bad : {nan, inf, -inf})
    for (const std::int64_t at : {std::int64_t(0), K / 2, K - 1}) {
      std::vector<float> r = random();
      r[static_cast<std::size_t>(at)] = bad;
      rows.push_back(r);
    }
  return rows;
}

bool same_float(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(QuantizeRows, Avx2KernelEqualsTheReference) {
  if (!int8_gemm_avx2_cpu()) GTEST_SKIP() << "this CPU has no AVX2";
  std::mt19937 gen(11);
  int rows = 0;
  for (const std::int64_t K : kLengths)
    for (const std::vector<float>& x : odd_rows(K, gen)) {
      SCOPED_TRACE(::testing::Message() << "K " << K << ", row " << rows);
      std::vector<std::int8_t> ref(static_cast<std::size_t>(K)), got(ref.size() + 8, 99);
      const float s_ref = quantize_row_s8(x.data(), K, ref.data(), false);
      const float s_got = quantize_row_s8(x.data(), K, got.data(), true);
      EXPECT_TRUE(same_float(s_got, s_ref)) << s_got << " vs " << s_ref;
      for (std::size_t i = ref.size(); i < got.size(); ++i)
        ASSERT_EQ(got[i], 99) << "written past the end";
      got.resize(ref.size());
      EXPECT_EQ(got, ref);
      // As u8 (xq + 128, the AVX-VNNI product's rows): quantize_row's values.
      std::vector<std::uint8_t> uref(ref.size()), ugot(ref.size() + 8, 99);
      EXPECT_TRUE(same_float(quantize_row(x.data(), K, uref.data(), false), s_ref));
      EXPECT_TRUE(same_float(quantize_row_u8_avx2(x.data(), K, ugot.data()), s_ref));
      for (std::size_t i = ref.size(); i < ugot.size(); ++i)
        ASSERT_EQ(ugot[i], 99) << "written past the end";
      ugot.resize(ref.size());
      EXPECT_EQ(ugot, uref);
      ++rows;
    }
  EXPECT_EQ(rows, 16 * 14);
}

// The 7-bit quantizations of the AVX2 kernel (quantize_row_s7 for the
// weights, quantize_row_u7 for the activations, xq + 64): the AVX2 kernel
// gives the reference's values and scale on the same rows; the values stay
// within [-63, 63]; the u7 values are the s7 ones, 64 up (a zero or
// non-finite row: 64, xq 0).
TEST(QuantizeRows, SevenBitAvx2KernelsEqualTheReference) {
  if (!int8_gemm_avx2_cpu()) GTEST_SKIP() << "this CPU has no AVX2";
  std::mt19937 gen(13);
  int rows = 0;
  for (const std::int64_t K : kLengths)
    for (const std::vector<float>& x : odd_rows(K, gen)) {
      SCOPED_TRACE(::testing::Message() << "K " << K << ", row " << rows);
      std::vector<std::int8_t> ref(static_cast<std::size_t>(K)), got(ref.size() + 8, 99);
      const float s_ref = quantize_row_s7(x.data(), K, ref.data(), false);
      const float s_got = quantize_row_s7(x.data(), K, got.data(), true);
      EXPECT_TRUE(same_float(s_got, s_ref)) << s_got << " vs " << s_ref;
      for (std::size_t i = ref.size(); i < got.size(); ++i)
        ASSERT_EQ(got[i], 99) << "written past the end";
      got.resize(ref.size());
      EXPECT_EQ(got, ref);
      std::vector<std::uint8_t> uref(ref.size()), ugot(ref.size() + 8, 99);
      EXPECT_TRUE(same_float(quantize_row_u7(x.data(), K, uref.data(), false), s_ref));
      EXPECT_TRUE(same_float(quantize_row_u7(x.data(), K, ugot.data(), true), s_ref));
      for (std::size_t i = ref.size(); i < ugot.size(); ++i)
        ASSERT_EQ(ugot[i], 99) << "written past the end";
      ugot.resize(ref.size());
      EXPECT_EQ(ugot, uref);
      for (std::size_t k = 0; k < ref.size(); ++k) {
        ASSERT_LE(std::abs(ref[k]), 63) << k;
        ASSERT_EQ(static_cast<int>(uref[k]) - 64, ref[k]) << k;
      }
      ++rows;
    }
  EXPECT_EQ(rows, 16 * 14);
}

// The reference's rules, by hand: the scale, rounding to even, the zero
// rows, a row with a NaN.
TEST(QuantizeRows, ReferenceByHand) {
  const float x[] = {127.0f, -0.5f, 1.5f, 2.5f, -63.5f};
  std::int8_t q[5];
  EXPECT_EQ(quantize_row_s8(x, 5, q, false), 1.0f);
  const std::int8_t want[] = {127, 0, 2, 2, -64};
  for (int k = 0; k < 5; ++k) EXPECT_EQ(q[k], want[k]) << k;
  const float zeros[] = {0.0f, -0.0f, 1e-31f};
  EXPECT_EQ(quantize_row_s8(zeros, 3, q, false), 1.0f);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(q[k], 0);
  const float bad[] = {1.0f, std::nanf("")};
  EXPECT_TRUE(std::isnan(quantize_row_s8(bad, 2, q, false)));
  EXPECT_EQ(q[0], 0);
  // In 7 bits: scale 127 / 63; x * 63 / 127 = 63, -0.248, 0.744, 1.24, -31.5 (ties to -32).
  const float x7[] = {127.0f, -0.5f, 1.5f, 2.5f, -63.5f};
  EXPECT_EQ(quantize_row_s7(x7, 5, q, false), 127.0f / 63.0f);
  const std::int8_t want7[] = {63, 0, 1, 1, -32};
  for (int k = 0; k < 5; ++k) EXPECT_EQ(q[k], want7[k]) << k;
  std::uint8_t u[3];
  EXPECT_EQ(quantize_row_u7(zeros, 3, u, false), 1.0f);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(u[k], 64);
}

// Where the CPU has AVX-512: its u8 kernel gives the same values, 128 up
// (the VNNI kernel's activations and the AVX2 kernel's are one quantization).
TEST(QuantizeRows, Avx512KernelGivesTheSameValues) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl"))
    GTEST_SKIP() << "this CPU has no AVX-512";
  std::mt19937 gen(13);
  for (const std::int64_t K : kLengths)
    for (const std::vector<float>& x : odd_rows(K, gen)) {
      std::vector<std::int8_t> ref(static_cast<std::size_t>(K));
      std::vector<std::uint8_t> u(ref.size());
      const float s_ref = quantize_row_s8(x.data(), K, ref.data(), false);
      const float s_u = quantize_row(x.data(), K, u.data(), true);
      EXPECT_TRUE(same_float(s_u, s_ref)) << "K " << K;
      for (std::size_t k = 0; k < ref.size(); ++k)
        ASSERT_EQ(static_cast<int>(u[k]) - 128, ref[k]) << "K " << K << " at " << k;
    }
}

}  // namespace
