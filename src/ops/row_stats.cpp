// The AVX-512 kernel of ops/row_stats.h, compiled for AVX-512 whatever the
// build targets and chosen at run time.
#include "ops/row_stats.h"

#include <algorithm>
#include <functional>

#include "attn/core/threads.h"
#include "core/parallel.h"

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

// The threshold t of row_top_candidates: the m-th largest of the 64 lane
// maxima (reorders them).
float lane_threshold(float* lanes, std::int64_t m);

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

namespace attn::detail {

namespace {

bool has_avx512() {
  static const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return avx512;
}

}  // namespace

float lane_threshold(float* lanes, std::int64_t m) {
  std::nth_element(lanes, lanes + (m - 1), lanes + 64, std::greater<float>());
  return lanes[m - 1];
}

// Compiled for the build's target: only the *_avx512 kernels use AVX-512.
RowStats row_stats(const float* x, std::int64_t V) {
#if defined(ATTN_ROW_STATS_AVX512)
  if (has_avx512() && V >= 64 && !std::isnan(x[0])) return row_stats_avx512(x, V);
#endif
  return row_stats_reference(x, V);
}

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

std::int64_t row_top_candidates(const float* x, std::int64_t V, std::int64_t m, std::int64_t* out) {
#if defined(ATTN_ROW_STATS_AVX512)
  if (has_avx512()) return row_top_candidates_avx512(x, V, m, out);
#endif
  return row_top_candidates_reference(x, V, m, out);
}

void rows_argmax(const float* x, std::int64_t rows, std::int64_t V, std::int64_t* out) {
  parallel_for(rows, loop_threads(rows > 1 && rows * V >= parallel_grain()),
               [&](std::int64_t r) { out[r] = row_argmax(x + r * V, V); });
}

}  // namespace attn::detail
