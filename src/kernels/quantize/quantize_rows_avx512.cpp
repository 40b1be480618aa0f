// One row's int8 quantization (kernels/quantize/quantize_rows.h) with
// AVX-512, compiled for AVX-512 F, BW and VL whatever the build targets and
// called only where the CPU has them.
#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/quantize/quantize_rows.h"
#include "kernels/target.h"
#include "kernels/vec/lane_mask.h"

namespace attn::detail {

ATTN_TARGET_BEGIN_AVX512("avx512f,avx512bw,avx512vl")

namespace {

// One vector of quantize_row_avx512: round(v * vinv) to nearest even,
// clamped to [-127, 127], + 128. A function of its own rather than a lambda:
// GCC does not pass a function's target attribute on to its lambdas.
inline __m512i quantize16_avx512(__m512 v, __m512 vinv) {
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127),
                shift = _mm512_set1_epi32(128);
  const __m512i r = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v, vinv),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(r, lo), hi), shift);
}

// The same row into u8 (xq + 128) with AVX-512: the same f32 product, the
// same rounding (to nearest even), the same clamp. Returns the row's scale.
float row_avx512(const float* x, std::int64_t K, std::uint8_t* out) {
  // max|x| in two registers, 32 values a step; a lane is unordered where
  // either value is NaN.
  __m512 m0 = _mm512_setzero_ps(), m1 = _mm512_setzero_ps();
  __mmask16 unordered = 0;
  std::int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    const __m512 a = _mm512_loadu_ps(x + k), b = _mm512_loadu_ps(x + k + 16);
    unordered |= _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
    m0 = _mm512_max_ps(m0, _mm512_abs_ps(a));
    m1 = _mm512_max_ps(m1, _mm512_abs_ps(b));
  }
  for (; k < K; k += 16) {
    const __mmask16 m = first_lanes16(K - k);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + k);
    unordered |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    m0 = _mm512_max_ps(m0, _mm512_abs_ps(v));
  }
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
  const RowScale s = row_scale_from_amax(amax, unordered == 0);
  if (s.inv == 0.0f) {  // zero or non-finite row: zeros
    std::memset(out, 128, static_cast<std::size_t>(K));
    return s.scale;
  }
  // round(x * inv) to nearest even, clamped to [-127, 127], + 128, 16
  // values a step (vpmovdb keeps each lane's low byte: the value itself,
  // in [1, 255]); the last step masked.
  const __m512 vinv = _mm512_set1_ps(s.inv);
  for (k = 0; k < K; k += 16) {
    const __mmask16 m = first_lanes16(K - k);
    _mm512_mask_cvtepi32_storeu_epi8(out + k, m,
                                     quantize16_avx512(_mm512_maskz_loadu_ps(m, x + k), vinv));
  }
  return s.scale;
}

}  // namespace

ATTN_TARGET_END_AVX512

float quantize_row_avx512(const float* x, std::int64_t K, std::uint8_t* out) {
  return row_avx512(x, K, out);
}

}  // namespace attn::detail
