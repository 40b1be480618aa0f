// The AVX-512 and AVX2 kernels of ops/row_stats.h, each compiled for its
// instruction set whatever the build targets and chosen at run time.
#include "ops/row_stats.h"

#include <immintrin.h>  // here, for the baseline target; then each kernel's pragma

#include <algorithm>
#include <functional>
#include <limits>

#include "attn/core/threads.h"
#include "core/parallel.h"

namespace attn::detail {

// The threshold t of row_top_candidates: the m-th largest of the 64 lane
// maxima (reorders them). Declared here, before the kernels' target
// pragmas: a declaration under each would make GCC take them for versions
// of one function (multiversioning) in a build for the baseline target.
float lane_threshold(float* lanes, std::int64_t m);

}  // namespace attn::detail

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq")
#if defined(__clang__)  // clang ignores the GCC pragma (the fuzz build)
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq"))), apply_to = function)
#endif
// GCC 12 warns inside its own AVX-512 intrinsics (GCC bug 105593; as in
// attention_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "ops/attention_vec_avx512.h"  // its exp: Cephes' polynomial, 2^n by vscalefps

namespace attn::detail {
namespace {

// max(a, b), b where either is NaN (vmaxps returns its second operand). The
// masked form: GCC 12 warns of _mm512_max_ps's unset pass-through register.
__m512 max_keep(__m512 a, __m512 b) { return _mm512_mask_max_ps(b, 0xFFFF, a, b); }

__m512d low_pd(__m512 e) { return _mm512_cvtps_pd(_mm512_castps512_ps256(e)); }
__m512d high_pd(__m512 e) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
}

// x has V >= 64 values, x[0] not NaN.
RowStats row_stats_avx512(const float* x, std::int64_t V) {
  // A NaN load leaves m.
  __m512 m0 = _mm512_set1_ps(x[0]), m1 = m0, m2 = m0, m3 = m0;
  std::int64_t v = 0;
  for (; v + 64 <= V; v += 64) {
    m0 = max_keep(_mm512_loadu_ps(x + v), m0);
    m1 = max_keep(_mm512_loadu_ps(x + v + 16), m1);
    m2 = max_keep(_mm512_loadu_ps(x + v + 32), m2);
    m3 = max_keep(_mm512_loadu_ps(x + v + 48), m3);
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, max_keep(max_keep(m0, m1), max_keep(m2, m3)));
  float m = lanes[0];
  for (int i = 1; i < 16; ++i) m = lanes[i] > m ? lanes[i] : m;
  for (; v < V; ++v) m = x[v] > m ? x[v] : m;
  const __m512 mv = _mm512_set1_ps(m);
  __m512d s0 = _mm512_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
  v = 0;
  for (; v + 32 <= V; v += 32) {
    const __m512 e0 = VecAvx512::exp(_mm512_sub_ps(_mm512_loadu_ps(x + v), mv));
    const __m512 e1 = VecAvx512::exp(_mm512_sub_ps(_mm512_loadu_ps(x + v + 16), mv));
    s0 = _mm512_add_pd(s0, low_pd(e0));
    s1 = _mm512_add_pd(s1, high_pd(e0));
    s2 = _mm512_add_pd(s2, low_pd(e1));
    s3 = _mm512_add_pd(s3, high_pd(e1));
  }
  alignas(64) double sums[8];
  _mm512_store_pd(sums, _mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3)));
  double s = 0;
  for (double part : sums) s += part;
  for (; v < V; ++v) s += static_cast<double>(exp_simd<float>(x[v] - m));
  return {m, static_cast<double>(m) + std::log(s)};
}

// No standard-library templates in here: their instances, compiled for
// AVX-512, could be the ones the linker keeps for every caller.
std::int64_t row_top_candidates_avx512(const float* x, std::int64_t V, std::int64_t m,
                                       std::int64_t* out) {
  __m512 m0 = _mm512_loadu_ps(x), m1 = _mm512_loadu_ps(x + 16), m2 = _mm512_loadu_ps(x + 32),
         m3 = _mm512_loadu_ps(x + 48);
  const std::int64_t whole = V / 64 * 64;
  for (std::int64_t v = 64; v < whole; v += 64) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + v));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + v + 16));
    m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + v + 32));
    m3 = _mm512_max_ps(m3, _mm512_loadu_ps(x + v + 48));
  }
  alignas(64) float lanes[64];
  _mm512_store_ps(lanes, m0);
  _mm512_store_ps(lanes + 16, m1);
  _mm512_store_ps(lanes + 32, m2);
  _mm512_store_ps(lanes + 48, m3);
  const __m512 t = _mm512_set1_ps(lane_threshold(lanes, m));
  std::int64_t v = 0, n = 0;
  for (; v + 16 <= V; v += 16) {
    unsigned mask = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + v), t, _CMP_GE_OQ);
    for (; mask != 0; mask &= mask - 1) out[n++] = v + __builtin_ctz(mask);
  }
  if (v < V) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (V - v)) - 1u);
    unsigned mask =
        _mm512_mask_cmp_ps_mask(tail, _mm512_maskz_loadu_ps(tail, x + v), t, _CMP_GE_OQ);
    for (; mask != 0; mask &= mask - 1) out[n++] = v + __builtin_ctz(mask);
  }
  return n;
}

}  // namespace
}  // namespace attn::detail

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
#define ATTN_ROW_STATS_AVX512 1
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#endif

namespace attn::detail {
namespace {

// exp_simd<float> (vec_math.h) in 8 lanes, step by step as GCC compiles the
// reference's loop for a CPU with FMA: n by the shifter trick with its
// product and sum fused, r = x - n C1 - n C2 and the polynomial in FMAs, its
// last step (p r) r + r fused and then + 1. The attention kernels' own
// (VecAvx2::exp, attention_avx2.cpp) rounds n from a rounded product and
// fuses the last step differently: with it log_sum_exp drifted from the
// reference's by up to 2e-9 relative on short rows, four times what the
// AVX-512 form does.
__m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-86.9f), hi = _mm256_set1_ps(88.7228394f);
  // Below -86.9 as 0 (its result is 0 anyway), as exp_simd: no subnormal
  // p 2^(n-1).
  const __m256 below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 xc = _mm256_min_ps(_mm256_andnot_ps(below, x), hi);
  const __m256 shifter = _mm256_set1_ps(12582912.0f);
  const __m256 n =
      _mm256_sub_ps(_mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), shifter), shifter);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
  // 2^n as 2^(n-1) * 2, as exp_simd.
  const __m256i e = _mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(126));
  const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, scale), _mm256_set1_ps(2.0f));
  // Below -86.9: 0; above log(FLT_MAX): inf; NaN stays NaN.
  const __m256 y0 = _mm256_blendv_ps(y, _mm256_setzero_ps(), below);
  const __m256 y1 = _mm256_blendv_ps(y0, _mm256_set1_ps(std::numeric_limits<float>::infinity()),
                                     _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(y1, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// vmaxps returns its second operand where either is NaN: a NaN x leaves m.
__m256 max_keep8(__m256 x, __m256 m) { return _mm256_max_ps(x, m); }

// x has V >= 32 values, x[0] not NaN; as row_stats_avx512, 8 lanes a register.
RowStats row_stats_avx2(const float* x, std::int64_t V) {
  __m256 m0 = _mm256_set1_ps(x[0]), m1 = m0, m2 = m0, m3 = m0;
  std::int64_t v = 0;
  for (; v + 32 <= V; v += 32) {
    m0 = max_keep8(_mm256_loadu_ps(x + v), m0);
    m1 = max_keep8(_mm256_loadu_ps(x + v + 8), m1);
    m2 = max_keep8(_mm256_loadu_ps(x + v + 16), m2);
    m3 = max_keep8(_mm256_loadu_ps(x + v + 24), m3);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, max_keep8(max_keep8(m0, m1), max_keep8(m2, m3)));
  float m = lanes[0];
  for (int i = 1; i < 8; ++i) m = lanes[i] > m ? lanes[i] : m;
  for (; v < V; ++v) m = x[v] > m ? x[v] : m;
  const __m256 mv = _mm256_set1_ps(m);
  __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
  v = 0;
  for (; v + 16 <= V; v += 16) {
    const __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + v), mv));
    const __m256 e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + v + 8), mv));
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e0)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e0, 1)));
    s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm256_castps256_ps128(e1)));
    s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm256_extractf128_ps(e1, 1)));
  }
  alignas(32) double sums[4];
  _mm256_store_pd(sums, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
  double s = 0;
  for (double part : sums) s += part;
  for (; v < V; ++v) s += static_cast<double>(exp_simd<float>(x[v] - m));
  return {m, static_cast<double>(m) + std::log(s)};
}

// As row_top_candidates_avx512: the 64 lane maxima in eight registers.
std::int64_t row_top_candidates_avx2(const float* x, std::int64_t V, std::int64_t m,
                                     std::int64_t* out) {
  __m256 r[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(x + 8 * j);
  const std::int64_t whole = V / 64 * 64;
  for (std::int64_t v = 64; v < whole; v += 64)
    for (int j = 0; j < 8; ++j) r[j] = _mm256_max_ps(r[j], _mm256_loadu_ps(x + v + 8 * j));
  alignas(32) float lanes[64];
  for (int j = 0; j < 8; ++j) _mm256_store_ps(lanes + 8 * j, r[j]);
  const float tf = lane_threshold(lanes, m);
  const __m256 t = _mm256_set1_ps(tf);
  std::int64_t v = 0, n = 0;
  for (; v + 8 <= V; v += 8) {
    unsigned mask = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + v), t, _CMP_GE_OQ)));
    for (; mask != 0; mask &= mask - 1) out[n++] = v + __builtin_ctz(mask);
  }
  for (; v < V; ++v)
    if (x[v] >= tf) out[n++] = v;
  return n;
}

}  // namespace
}  // namespace attn::detail

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
#define ATTN_ROW_STATS_AVX2 1
#endif

namespace attn::detail {

bool row_stats_cpu_has(VecForm form) {
  switch (form) {
    case VecForm::reference: return true;
#if defined(ATTN_ROW_STATS_AVX2)
    case VecForm::avx2:
      return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
#endif
#if defined(ATTN_ROW_STATS_AVX512)
    case VecForm::avx512:
      return __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512dq") != 0;
#endif
    default: return false;
  }
}

namespace {

VecForm best_form() {
  static const VecForm form = row_stats_cpu_has(VecForm::avx512) ? VecForm::avx512
                              : row_stats_cpu_has(VecForm::avx2) ? VecForm::avx2
                                                                 : VecForm::reference;
  return form;
}

}  // namespace

float lane_threshold(float* lanes, std::int64_t m) {
  std::nth_element(lanes, lanes + (m - 1), lanes + 64, std::greater<float>());
  return lanes[m - 1];
}

// Compiled for the build's target: only the *_avx512 and *_avx2 kernels use
// their instruction sets. Short rows and a NaN first logit: the reference.
RowStats row_stats_on(VecForm form, const float* x, std::int64_t V) {
  switch (form) {
#if defined(ATTN_ROW_STATS_AVX512)
    case VecForm::avx512:
      if (V >= 64 && !std::isnan(x[0])) return row_stats_avx512(x, V);
      break;
#endif
#if defined(ATTN_ROW_STATS_AVX2)
    case VecForm::avx2:
      if (V >= 32 && !std::isnan(x[0])) return row_stats_avx2(x, V);
      break;
#endif
    default: break;
  }
  return row_stats_reference(x, V);
}

RowStats row_stats(const float* x, std::int64_t V) { return row_stats_on(best_form(), x, V); }

std::int64_t row_top_candidates_reference(const float* x, std::int64_t V, std::int64_t m,
                                          std::int64_t* out) {
  std::int64_t n = 0;
  float lanes[64];
  for (int l = 0; l < 64; ++l) lanes[l] = x[l];
  for (std::int64_t v = 64; v < V / 64 * 64; ++v) lanes[v % 64] = std::max(lanes[v % 64], x[v]);
  const float t = lane_threshold(lanes, m);
  for (std::int64_t v = 0; v < V; ++v)
    if (x[v] >= t) out[n++] = v;
  return n;
}

std::int64_t row_top_candidates_on(VecForm form, const float* x, std::int64_t V, std::int64_t m,
                                   std::int64_t* out) {
  switch (form) {
#if defined(ATTN_ROW_STATS_AVX512)
    case VecForm::avx512: return row_top_candidates_avx512(x, V, m, out);
#endif
#if defined(ATTN_ROW_STATS_AVX2)
    case VecForm::avx2: return row_top_candidates_avx2(x, V, m, out);
#endif
    default: return row_top_candidates_reference(x, V, m, out);
  }
}

std::int64_t row_top_candidates(const float* x, std::int64_t V, std::int64_t m, std::int64_t* out) {
  return row_top_candidates_on(best_form(), x, V, m, out);
}

void rows_argmax(const float* x, std::int64_t rows, std::int64_t V, std::int64_t* out) {
  parallel_for(rows, loop_threads(rows > 1 && rows * V >= parallel_grain()),
               [&](std::int64_t r) { out[r] = row_argmax(x + r * V, V); });
}

}  // namespace attn::detail
