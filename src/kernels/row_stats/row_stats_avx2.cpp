// The AVX2 kernels of kernels/row_stats/row_stats.h, compiled for AVX2 and FMA
// whatever the build targets and called only where the CPU has it.
#include <immintrin.h>  // here, for the baseline target; then the kernels' pragma

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/row_stats/row_stats.h"
#include "kernels/target.h"

ATTN_TARGET_BEGIN("avx2,fma")

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

// x has V >= 32 values, x[0] not NaN; as the AVX-512 form, 8 lanes a register.
RowStats stats(const float* x, std::int64_t V) {
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

// As the AVX-512 form: the 64 lane maxima in eight registers.
std::int64_t top_candidates(const float* x, std::int64_t V, std::int64_t m, std::int64_t* out) {
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

ATTN_TARGET_END

namespace attn::detail {

RowStats row_stats_avx2(const float* x, std::int64_t V) { return stats(x, V); }

std::int64_t row_top_candidates_avx2(const float* x, std::int64_t V, std::int64_t m,
                                     std::int64_t* out) {
  return top_candidates(x, V, m, out);
}

}  // namespace attn::detail
