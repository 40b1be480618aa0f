// The AVX-512 kernels of kernels/row_stats/row_stats.h, compiled for AVX-512 F and DQ
// whatever the build targets and called only where the CPU has it.
#include <immintrin.h>  // here, for the baseline target; then the kernels' pragma

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/row_stats/row_stats.h"
#include "kernels/target.h"

ATTN_TARGET_BEGIN_AVX512("avx512f,avx512dq")
#include "kernels/attention/attention_vec_avx512.h"  // its exp: Cephes' polynomial, 2^n by vscalefps

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
RowStats stats(const float* x, std::int64_t V) {
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
std::int64_t top_candidates(const float* x, std::int64_t V, std::int64_t m, std::int64_t* out) {
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

ATTN_TARGET_END_AVX512

namespace attn::detail {

RowStats row_stats_avx512(const float* x, std::int64_t V) { return stats(x, V); }

std::int64_t row_top_candidates_avx512(const float* x, std::int64_t V, std::int64_t m,
                                       std::int64_t* out) {
  return top_candidates(x, V, m, out);
}

}  // namespace attn::detail
