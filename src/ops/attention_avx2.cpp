// The attention kernels (attention_kernels.h) for AVX2 + FMA: 8 floats per
// register, a 6 x 2-register micro-kernel (12 accumulators of 16 registers).
// Compiled for AVX2 whatever the build's -march; attention.cpp calls these only
// when the CPU has AVX2 and FMA.
//
// Headers first, for the baseline target; then the target pragma.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "ops/attention_kernel.h"
#include "ops/philox_inline.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#if defined(__clang__)  // clang ignores the GCC pragma (the fuzz build)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#endif

#include "ops/attention_kernels.h"

namespace attn::detail {
namespace {

struct VecAvx2 {
  using T = float;
  using R = __m256;
  static constexpr int W = 8;
  static constexpr int kMR = 6, kNV = 2;
  static R zero() { return _mm256_setzero_ps(); }
  static R set1(float x) { return _mm256_set1_ps(x); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R x) { _mm256_storeu_ps(p, x); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static float hsum(R x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // exp as vec_math.h's exp_simd<float>, 2^n built in the exponent bits;
  // x < -86.9 (and -inf) gives 0, NaN stays NaN (the clamps would make it
  // exp(-86.9)).
  static R exp(R x) {
    const R lo = set1(-86.9f);
    const R xc = _mm256_min_ps(_mm256_max_ps(x, lo), set1(88.7228394f));
    const R n = _mm256_round_ps(_mm256_mul_ps(xc, set1(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm256_fnmadd_ps(n, set1(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, set1(-2.12194440e-4f), r);
    R p = set1(1.9875691500e-4f);
    p = fma(p, r, set1(1.3981999507e-3f));
    p = fma(p, r, set1(8.3334519073e-3f));
    p = fma(p, r, set1(4.1665795894e-2f));
    p = fma(p, r, set1(1.6666665459e-1f));
    p = fma(p, r, set1(5.0000001201e-1f));
    p = fma(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, set1(1.0f)));
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126));
    const R scale = _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
    const R y = _mm256_mul_ps(_mm256_mul_ps(p, scale), set1(2.0f));
    const R y0 = _mm256_blendv_ps(y, zero(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(y0, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
};

}  // namespace

const AttnKernelTable<float>* attention_kernels_avx2() {
  static const AttnKernelTable<float> table =
      make_attention_kernels<VecAvx2>("avx2", AttnTiles{32, 96});
  return &table;
}

}  // namespace attn::detail

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
#else
namespace attn::detail {
const AttnKernelTable<float>* attention_kernels_avx2() { return nullptr; }
}  // namespace attn::detail
#endif
