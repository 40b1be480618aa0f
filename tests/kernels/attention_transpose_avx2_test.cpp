// The attention kernels' lane transposes (src/kernels/attention/attention_transpose.h)
// with AVX2's in-register versions (src/kernels/vec/vec_avx2.h:
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

#include "kernels/attention/attention_kernel.h"
#include "kernels/philox/philox_inline.h"
#include "testing.h"

namespace {

bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

}  // namespace

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#endif

#include "kernels/attention/attention_common.h"
#include "kernels/attention/attention_transpose.h"
#include "kernels/vec/vec_avx2.h"

#include "attention_transpose_checks.h"

namespace attn::detail {
namespace {

void check_interleave() { interleave_equals_element_loop<VecAvx2>(); }
void check_deinterleave() { deinterleave_equals_element_loop<VecAvx2>(); }
void check_rows_to_lanes() { rows_to_lanes_and_back<VecAvx2>(); }

// exp and exp_n (attention_transpose_checks.h); above 88.72, and at +inf,
// what 88.72 gives.
void check_exp() {
  const auto exp1 = [](__m256* r) { r[0] = VecAvx2::exp(r[0]); };
  const float at_max = map_registers<VecAvx2, 1>(std::vector<float>(8, 88.7228394f), exp1)[0];
  exp_checks<VecAvx2>(at_max);
  const std::vector<float> inf(8, std::numeric_limits<float>::infinity());
  const float at_inf = map_registers<VecAvx2, 1>(inf, exp1)[0];
  EXPECT_EQ(at_inf, at_max);
}

// 2^n is built in the exponent bits: up to n = 127, x about 88.0.
void check_softmax_exp() { softmax_exp_checks<VecAvx2>(88.0f); }

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

// The kernels' exp against std::exp, its lock-step forms against it
// (attention_transpose_checks.h: exp_checks).
TEST(AttentionTransposeAvx2, ExpAgainstStdExp) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2 + FMA on this CPU";
  check_exp();
}

// The tiled forward's softmax exp against std::exp.
TEST(AttentionTransposeAvx2, SoftmaxExpAgainstStdExp) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2 + FMA on this CPU";
  check_softmax_exp();
}

}  // namespace
}  // namespace attn::detail
