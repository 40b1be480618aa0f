// src/ops/attention_vec_avx512.h — internal: the AVX-512 f32 vector type of
// the attention kernels (the V of attention_common.h). Included, after their
// target pragma, by attention_avx512.cpp and attention_bf16.cpp.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace attn::detail {
namespace {

struct VecAvx512 {
  using T = float;
  using R = __m512;
  static constexpr int W = 16;
  static constexpr int kMR = 6, kNV = 4;
  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R x) { _mm512_storeu_ps(p, x); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static float hsum(R x) { return _mm512_reduce_add_ps(x); }
  static R gather(const float* p, const std::int64_t* idx) {
    const __m256 lo = _mm512_i64gather_ps(_mm512_load_epi64(idx), p, 4);
    const __m256 hi = _mm512_i64gather_ps(_mm512_load_epi64(idx + 8), p, 4);
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
  }
  static void scatter(float* p, const std::int64_t* idx, R x) {
    _mm512_i64scatter_ps(p, _mm512_load_epi64(idx), _mm512_castps512_ps256(x), 4);
    _mm512_i64scatter_ps(p, _mm512_load_epi64(idx + 8), _mm512_extractf32x8_ps(x, 1), 4);
  }
  static R gather(const float* p, const std::int32_t* idx) {
    return _mm512_i32gather_ps(_mm512_load_epi32(idx), p, 4);
  }
  static void scatter(float* p, const std::int32_t* idx, R x) {
    _mm512_i32scatter_ps(p, _mm512_load_epi32(idx), x, 4);
  }
  // exp as vec_math.h's exp_simd<float> (Cephes expf: x = n ln2 + r, a degree-7
  // polynomial for e^r), with 2^n applied by scalef; x < -86.9 (and -inf) gives 0.
  static R exp(R x) {
    const R lo = set1(-86.9f);
    const R xc = _mm512_min_ps(_mm512_max_ps(x, lo), set1(88.7228394f));
    const R n = _mm512_roundscale_ps(_mm512_mul_ps(xc, set1(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm512_fnmadd_ps(n, set1(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, set1(-2.12194440e-4f), r);
    R p = set1(1.9875691500e-4f);
    p = fma(p, r, set1(1.3981999507e-3f));
    p = fma(p, r, set1(8.3334519073e-3f));
    p = fma(p, r, set1(4.1665795894e-2f));
    p = fma(p, r, set1(1.6666665459e-1f));
    p = fma(p, r, set1(5.0000001201e-1f));
    p = fma(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, set1(1.0f)));
    const R y = _mm512_scalef_ps(p, n);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), y, zero());
  }
};

}  // namespace
}  // namespace attn::detail
