// The attention kernels' lane transposes (src/kernels/attention/attention_transpose.h)
// with AVX-512's in-register versions (src/kernels/vec/vec_avx512.h:
// interleave / deinterleave, a 16 x 16 transpose, or two 8 x 8 ones side by
// side for up to 8 columns) against plain element loops
// (attention_transpose_checks.h; AVX2's: attention_transpose_avx2_test.cpp),
// and the kernels' exp and the tiled forward's softmax exp against std::exp.
//
// Headers first, for the baseline target; then the target pragma, as in
// src/kernels/attention/attention_avx512.cpp, over the checks alone. The TESTs stay
// outside it: code compiled for AVX-512 must not run before the CPU check,
// and a test body compiled for it did, on its way out after the skip (under
// AddressSanitizer, whose clearing of the frame's shadow used an AVX-512
// store: SIGILL on a CPU without AVX-512).
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

#include "kernels/attention/attention_common.h"
#include "kernels/attention/attention_transpose.h"
#include "kernels/vec/vec_avx512.h"

#include "attention_transpose_checks.h"

namespace attn::detail {
namespace {

// The checks for AVX-512's transposes, instantiated here, under the pragma.
void check_interleave() { interleave_equals_element_loop<VecAvx512>(); }
void check_deinterleave() { deinterleave_equals_element_loop<VecAvx512>(); }
void check_rows_to_lanes() { rows_to_lanes_and_back<VecAvx512>(); }
// exp and exp_n (attention_transpose_checks.h); above 88.72 scalef gives inf.
void check_exp() { exp_checks<VecAvx512>(std::numeric_limits<float>::infinity()); }

// The tiled forward's softmax exp (attention_transpose_checks.h); above
// 88.72 scalef gives inf.
void check_softmax_exp() {
  softmax_exp_checks<VecAvx512>(88.72f);
  const auto got = map_registers<VecAvx512, 1>(std::vector<float>(16, 100.0f),
                                               [](__m512* r) { VecAvx512::softmax_exp_n<1>(r); });
  EXPECT_EQ(got[0], std::numeric_limits<float>::infinity());
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
  check_interleave();
}

TEST(AttentionTranspose, DeinterleaveEqualsElementLoop) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 F/DQ on this CPU";
  check_deinterleave();
}

TEST(AttentionTranspose, RowsToLanesAndBack) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 F/DQ on this CPU";
  check_rows_to_lanes();
}

// The kernels' exp against std::exp, its lock-step forms against it.
TEST(AttentionTranspose, ExpAgainstStdExp) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 F/DQ on this CPU";
  check_exp();
}

// The tiled forward's softmax exp against std::exp.
TEST(AttentionTranspose, SoftmaxExpAgainstStdExp) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 F/DQ on this CPU";
  check_softmax_exp();
}

}  // namespace
}  // namespace attn::detail
