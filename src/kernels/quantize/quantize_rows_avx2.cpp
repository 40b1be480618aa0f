// One row's int8 quantization on AVX2 (kernels/quantize/quantize_rows.h): x
// into s8 or u8 (xq + 128) in 8 bits, or in the 7 bits of the AVX2 kernel
// (kernels/gemm/int8_gemm.h) as s8 or as u8 (xq + 64), the same bits as
// quantize_reference at the same limit. Compiled for AVX2 whatever the
// build targets and called only where the CPU has it.
#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/quantize/quantize_rows.h"
#include "kernels/target.h"

namespace attn::detail {

ATTN_TARGET_BEGIN("avx2,fma")

namespace {

// No standard-library templates in here: their instances, compiled for
// AVX2, could be the ones the linker keeps for every caller.

// One vector: round(v * vinv) to nearest even (the rounding mode, as
// nearbyint in the reference), clamped to [-127, 127].
__attribute__((target("avx2,fma"), always_inline)) inline __m256i quantize8(__m256 v, __m256 vinv,
                                                                            __m256i lo,
                                                                            __m256i hi) {
  const __m256i r = _mm256_cvtps_epi32(_mm256_mul_ps(v, vinv));
  return _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
}

// x into [-limit, limit] plus offset, as bytes: the scale of `levels`
// (limit) per max|x|.
__attribute__((target("avx2,fma"), always_inline)) inline float quantize_avx2(
    const float* x, std::int64_t K, std::int8_t* out, int limit, int offset) {
  // max|x| in two registers, 16 values a step, the rest one by one; a lane
  // is unordered where either value is NaN.
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
  int unordered = 0;
  std::int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m256 a = _mm256_loadu_ps(x + k), b = _mm256_loadu_ps(x + k + 8);
    unordered |= _mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q));
    m0 = _mm256_max_ps(m0, _mm256_and_ps(a, abs_mask));
    m1 = _mm256_max_ps(m1, _mm256_and_ps(b, abs_mask));
  }
  const __m256 m = _mm256_max_ps(m0, m1);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  float amax = _mm_cvtss_f32(h);
  bool finite = unordered == 0;
  for (; k < K; ++k) {
    const float a = std::fabs(x[k]);
    if (!(a <= FLT_MAX)) finite = false;
    amax = a > amax ? a : amax;
  }
  const RowScale s = row_scale_from_amax(amax, finite, static_cast<float>(limit));
  if (s.inv == 0.0f) {  // zero or non-finite row: zeros
    std::memset(out, offset, static_cast<std::size_t>(K));
    return s.scale;
  }
  // 32 values a step packed to bytes (the packs work per 128-bit lane, the
  // permute puts the dwords back in order); the rest one by one.
  const __m256 vinv = _mm256_set1_ps(s.inv);
  const __m256i lo = _mm256_set1_epi32(-limit), hi = _mm256_set1_epi32(limit);
  const __m256i off = _mm256_set1_epi8(static_cast<char>(offset));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  k = 0;
  for (; k + 32 <= K; k += 32) {
    const __m256i q0 = quantize8(_mm256_loadu_ps(x + k), vinv, lo, hi),
                  q1 = quantize8(_mm256_loadu_ps(x + k + 8), vinv, lo, hi),
                  q2 = quantize8(_mm256_loadu_ps(x + k + 16), vinv, lo, hi),
                  q3 = quantize8(_mm256_loadu_ps(x + k + 24), vinv, lo, hi);
    const __m256i bytes =
        _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k),
                        _mm256_add_epi8(_mm256_permutevar8x32_epi32(bytes, order), off));
  }
  for (; k < K; ++k) {
    const int r = _mm_cvtss_si32(_mm_set_ss(x[k] * s.inv));
    out[k] = static_cast<std::int8_t>((r < -limit ? -limit : r > limit ? limit : r) + offset);
  }
  return s.scale;
}

}  // namespace

float quantize_row_s8_avx2(const float* x, std::int64_t K, std::int8_t* out) {
  return quantize_avx2(x, K, out, 127, 0);
}

float quantize_row_u8_avx2(const float* x, std::int64_t K, std::uint8_t* out) {
  return quantize_avx2(x, K, reinterpret_cast<std::int8_t*>(out), 127, 128);
}

float quantize_row_s7_avx2(const float* x, std::int64_t K, std::int8_t* out) {
  return quantize_avx2(x, K, out, 63, 0);
}

float quantize_row_u7_avx2(const float* x, std::int64_t K, std::uint8_t* out) {
  return quantize_avx2(x, K, reinterpret_cast<std::int8_t*>(out), 63, 64);
}

ATTN_TARGET_END

}  // namespace attn::detail
