// The attention kernels' lane transposes (src/ops/attention_transpose.h)
// with AVX-512's in-register versions (src/ops/attention_vec_avx512.h:
// interleave / deinterleave, a 16 x 16 transpose, or two 8 x 8 ones side by
// side for up to 8 columns) against plain element loops: every count of
// columns and lanes, the same bits, nothing written outside the block.
//
// Headers first, for the baseline target; then the target pragma, as in
// src/ops/attention_avx512.cpp, over the checks alone. The TESTs stay
// outside it: code compiled for AVX-512 must not run before the CPU check,
// and a test body compiled for it did, on its way out after the skip (under
// AddressSanitizer, whose clearing of the frame's shadow used an AVX-512
// store: SIGILL on a CPU without AVX-512).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "ops/attention_kernel.h"
#include "ops/philox_inline.h"
#include "testing.h"

namespace {

bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
}

}  // namespace

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")
#if defined(__clang__)
#pragma clang attribute push( \
    __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma"))), apply_to = function)
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "ops/attention_common.h"
#include "ops/attention_transpose.h"
#include "ops/attention_vec_avx512.h"

namespace attn::detail {
namespace {

using Lanes = LaneTranspose<VecAvx512>;
constexpr float kSentinel = -12345.0f;

std::vector<float> random_floats(std::size_t n, std::mt19937& gen) {
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> x(n);
  for (float& v : x) v = u(gen);
  return x;
}

void interleave_equals_element_loop() {
  static_assert(Lanes::kInRegisters);
  std::mt19937 gen(3);
  for (float scale : {1.0f, 0.3535f})
    for (int n = 1; n <= 16; ++n) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " scale " << scale);
      // 16 rows of n values at scattered places in one buffer.
      const std::vector<float> buf = random_floats(16 * 40, gen);
      const float* src[16];
      for (int l = 0; l < 16; ++l) src[l] = buf.data() + ((l * 7) % 16) * 40 + l % 3;
      std::vector<float> got(16 * 17, kSentinel);
      VecAvx512::interleave(src, n, scale, got.data());
      for (int j = 0; j < 17; ++j)
        for (int l = 0; l < 16; ++l) {
          const float want = j < n ? src[l][j] * scale : kSentinel;
          ASSERT_EQ(got[j * 16 + l], want) << "column " << j << " lane " << l;
        }
    }
}

void deinterleave_equals_element_loop() {
  std::mt19937 gen(4);
  for (float scale : {1.0f, 0.25f, 1.7f})
    for (int n = 1; n <= 16; ++n)
      for (int lanes = 1; lanes <= 16; ++lanes) {
        SCOPED_TRACE(::testing::Message() << "n " << n << " lanes " << lanes);
        const std::vector<float> src = random_floats(16 * 16, gen);
        std::vector<float> out(16 * 20, kSentinel);
        float* dst[16];
        for (int l = 0; l < 16; ++l) dst[l] = out.data() + ((l * 5) % 16) * 20 + 1;
        VecAvx512::deinterleave(src.data(), n, scale, dst, lanes);
        for (int l = 0; l < 16; ++l)
          for (int j = -1; j < 19; ++j) {
            const float want = l < lanes && j >= 0 && j < n ? src[j * 16 + l] * scale : kSentinel;
            ASSERT_EQ(dst[l][j], want) << "lane " << l << " column " << j;
          }
      }
}

// The block loops around them: rows of any length (null rows read as
// zeros), a leading dimension other than 16, each lane its own scale.
void rows_to_lanes_and_back() {
  std::mt19937 gen(5);
  for (std::int64_t d : {1, 5, 8, 9, 16, 24, 37, 64})
    for (std::int64_t ld : {16, 48}) {
      SCOPED_TRACE(::testing::Message() << "d " << d << " ld " << ld);
      const std::vector<float> buf = random_floats(static_cast<std::size_t>(16 * d), gen);
      const float* src[16];
      for (int l = 0; l < 16; ++l) src[l] = l == 6 ? nullptr : buf.data() + l * d;
      std::vector<float> lanes(static_cast<std::size_t>(d * ld), kSentinel);
      Lanes::rows_to_lanes(src, d, 0.5f, lanes.data(), ld);
      for (std::int64_t c = 0; c < d; ++c)
        for (std::int64_t l = 0; l < ld; ++l) {
          const float want = l >= 16 ? kSentinel : src[l] ? src[l][c] * 0.5f : 0.0f;
          ASSERT_EQ(lanes[static_cast<std::size_t>(c * ld + l)], want) << c << " " << l;
        }
      float scale[16];
      for (int l = 0; l < 16; ++l) scale[l] = 1.0f / static_cast<float>(l + 1);
      for (int count : {16, 11}) {
        std::vector<float> rows(static_cast<std::size_t>(16 * (d + 1)), kSentinel);
        float* dst[16];
        for (int l = 0; l < 16; ++l) dst[l] = rows.data() + l * (d + 1);
        Lanes::lanes_to_rows(lanes.data(), ld, d, scale, dst, count);
        for (int l = 0; l < 16; ++l)
          for (std::int64_t c = 0; c <= d; ++c) {
            const float want = l < count && c < d
                                   ? lanes[static_cast<std::size_t>(c * ld + l)] * scale[l]
                                   : kSentinel;
            ASSERT_EQ(dst[l][c], want) << "lane " << l << " column " << c;
          }
      }
    }
}

}  // namespace
}  // namespace attn::detail

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options

namespace attn::detail {
namespace {

TEST(AttentionTranspose, InterleaveEqualsElementLoop) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 F/DQ on this CPU";
  interleave_equals_element_loop();
}

TEST(AttentionTranspose, DeinterleaveEqualsElementLoop) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 F/DQ on this CPU";
  deinterleave_equals_element_loop();
}

TEST(AttentionTranspose, RowsToLanesAndBack) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 F/DQ on this CPU";
  rows_to_lanes_and_back();
}

}  // namespace
}  // namespace attn::detail
