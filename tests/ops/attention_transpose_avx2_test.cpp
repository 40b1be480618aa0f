// The attention kernels' lane transposes (src/ops/attention_transpose.h)
// with AVX2's in-register versions (src/ops/attention_vec_avx2.h:
// interleave / deinterleave through an 8 x 8 transpose) against plain
// element loops (attention_transpose_checks.h), as
// attention_transpose_test.cpp does for AVX-512: the checks under the
// target pragma, the TESTs outside it. Also VecAvx2's exp against std::exp
// (masked scores, -inf, next to normal ones in every lane).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
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

bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

}  // namespace

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#endif

#include "ops/attention_common.h"
#include "ops/attention_transpose.h"
#include "ops/attention_vec_avx2.h"

#include "attention_transpose_checks.h"

namespace attn::detail {
namespace {

void check_interleave() { interleave_equals_element_loop<VecAvx2>(); }
void check_deinterleave() { deinterleave_equals_element_loop<VecAvx2>(); }
void check_rows_to_lanes() { rows_to_lanes_and_back<VecAvx2>(); }

// VecAvx2::exp on xs, 8 at a time (xs.size() a multiple of 8).
std::vector<float> vec_exp(const std::vector<float>& xs) {
  std::vector<float> out(xs.size());
  for (std::size_t i = 0; i < xs.size(); i += 8)
    VecAvx2::store(out.data() + i, VecAvx2::exp(VecAvx2::load(xs.data() + i)));
  return out;
}

// VecAvx2::exp_n<N> on xs, N registers at a time (xs.size() a multiple of 8 N).
template <int N>
std::vector<float> vec_exp_n(const std::vector<float>& xs) {
  std::vector<float> out(xs.size());
  for (std::size_t i = 0; i < xs.size(); i += 8 * N) {
    __m256 r[N];
    for (int j = 0; j < N; ++j) r[j] = VecAvx2::load(xs.data() + i + 8 * j);
    VecAvx2::exp_n<N>(r);
    for (int j = 0; j < N; ++j) VecAvx2::store(out.data() + i + 8 * j, r[j]);
  }
  return out;
}

}  // namespace
}  // namespace attn::detail

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options

namespace attn::detail {
namespace {

TEST(AttentionTransposeAvx2, InterleaveEqualsElementLoop) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2 + FMA on this CPU";
  check_interleave();
}

TEST(AttentionTransposeAvx2, DeinterleaveEqualsElementLoop) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2 + FMA on this CPU";
  check_deinterleave();
}

TEST(AttentionTransposeAvx2, RowsToLanesAndBack) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2 + FMA on this CPU";
  check_rows_to_lanes();
}

// The kernels' exp: within 3e-7 relative of std::exp from -86.9 (where its
// p 2^(n-1) is subnormal) to 88.72; 0 below -86.9 and for -inf (masked
// scores), however their lanes mix with normal ones; above 88.72 (and inf)
// what 88.72 gives; NaN stays NaN. Its lock-step form, 2 and 4 registers at
// a time, gives the same bits.
TEST(AttentionTransposeAvx2, ExpAgainstStdExp) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2 + FMA on this CPU";
  std::vector<float> xs;
  for (float x = -86.9f; x < 88.7f; x += 0.0137f) xs.push_back(x);
  for (float x = -86.9f; x < -86.5f; x += 1e-4f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-8f, -1e-8f, 88.72f}) xs.push_back(x);
  const float below[] = {-86.95f, -87.0f, -100.0f, -1e6f, -std::numeric_limits<float>::infinity()};
  const std::size_t normal = xs.size();
  for (std::size_t i = 0; i < 40; ++i) {  // every lane position, next to normal values
    xs.push_back(below[i % 5]);
    xs.push_back(static_cast<float>(i) * -0.5f);
  }
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  xs.push_back(-std::numeric_limits<float>::quiet_NaN());
  xs.push_back(100.0f);  // above 88.72: what 88.72 gives
  xs.push_back(std::numeric_limits<float>::infinity());
  while (xs.size() % 32 != 0) xs.push_back(1.0f);
  const std::vector<float> got = vec_exp(xs);
  // The lock-step forms (exp_block) give exp's bits, lane for lane.
  for (const std::vector<float>& lock : {vec_exp_n<4>(xs), vec_exp_n<2>(xs)})
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (std::isnan(xs[i])) {
        EXPECT_TRUE(std::isnan(lock[i])) << "at " << i;
      } else {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(lock[i]), std::bit_cast<std::uint32_t>(got[i]))
            << xs[i] << " at " << i;
      }
    }
  float worst = 0;
  for (std::size_t i = 0; i < normal; ++i)
    worst = std::max(worst, std::fabs(got[i] - std::exp(xs[i])) / std::exp(xs[i]));
  EXPECT_LT(worst, 3e-7f);
  for (std::size_t i = normal; i < xs.size(); ++i) {
    if (std::isnan(xs[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else if (xs[i] < -86.9f) {
      EXPECT_EQ(got[i], 0.0f) << xs[i] << " at " << i;
    } else if (xs[i] > 88.72f) {
      EXPECT_EQ(got[i], vec_exp(std::vector<float>(8, 88.7228394f))[0]) << xs[i] << " at " << i;
    } else {
      EXPECT_NEAR(got[i], std::exp(xs[i]), 3e-7f * std::exp(xs[i])) << xs[i] << " at " << i;
    }
  }
}

}  // namespace
}  // namespace attn::detail
