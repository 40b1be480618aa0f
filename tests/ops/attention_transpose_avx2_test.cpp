// The attention kernels' lane transposes (src/ops/attention_transpose.h)
// with AVX2's in-register versions (src/ops/attention_vec_avx2.h:
// interleave / deinterleave through an 8 x 8 transpose) against plain
// element loops (attention_transpose_checks.h), as
// attention_transpose_test.cpp does for AVX-512: the checks under the
// target pragma, the TESTs outside it.
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

}  // namespace
}  // namespace attn::detail
