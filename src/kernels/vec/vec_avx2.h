// src/kernels/vec/vec_avx2.h — internal: the AVX2 + FMA f32 vector type of
// the attention kernels (the V of attention_common.h) and of the row
// statistics (row_stats_kernel.h) and the Philox words
// (philox_kernel.h): 8 floats per register,
// a 6 x 2-register micro-kernel (12 accumulators of 16 registers), 3 x 4 in
// the tiled forward (a query tile of 32 is one panel of 4 registers: 3
// broadcasts and 4 loads for 12 FMAs, not 6 and 2; 1.3% faster on a Zen 1 at
// n 1024, the same bits: each sum still runs over k in order). Included,
// after its target pragma, by attention_avx2.cpp and row_stats_avx2.cpp (and
// by the transpose's test).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/vec/vec_exp_poly.h"

namespace attn::detail {
namespace {

struct VecAvx2 {
  using T = float;
  using R = __m256;
  static constexpr int W = 8;
  static constexpr int kMR = 6, kNV = 2;
  static constexpr int kFwdMR = 3, kFwdNV = 4;
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
  // vmaxps returns its second operand where either is NaN: a NaN x leaves m.
  static R max_keep(R x, R m) { return _mm256_max_ps(x, m); }
  // The lanes where x >= t, as the low bits of an int.
  static unsigned ge_mask(R x, R t) {
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(x, t, _CMP_GE_OQ)));
  }
  // Doubles, W / 2 a register: a register's low and high lanes widened.
  using D = __m256d;
  static D zero_d() { return _mm256_setzero_pd(); }
  static D add_d(D a, D b) { return _mm256_add_pd(a, b); }
  static D low_d(R x) { return _mm256_cvtps_pd(_mm256_castps256_ps128(x)); }
  static D high_d(R x) { return _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)); }
  static void store_d(double* p, D x) { _mm256_storeu_pd(p, x); }
  static float hsum(R x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // Lane interleaving of one block of 8 rows through an 8 x 8 transpose in
  // registers: dst[j * 8 + l] = scale * src[l][j] for l < 8, j < n <= 8.
  // Masked loads read n elements of each row and nothing past them.
  static void interleave(const float* const* src, int n, float scale, float* dst) {
    R r[8];
    if (n == 8) {
      for (int l = 0; l < 8; ++l) r[l] = load(src[l]);
    } else {
      const __m256i m = first_lanes(n);
      for (int l = 0; l < 8; ++l) r[l] = _mm256_maskload_ps(src[l], m);
    }
    transpose8(r);
    const R sc = set1(scale);
    for (int j = 0; j < n; ++j) store(dst + j * 8, mul(r[j], sc));
  }
  // The reverse for the first `lanes` rows: dst[l][j] = scale * src[j * 8 +
  // l] for l < lanes, j < n <= 8; nothing else is written.
  static void deinterleave(const float* src, int n, float scale, float* const* dst, int lanes) {
    R r[8];
    for (int j = 0; j < 8; ++j) r[j] = j < n ? load(src + j * 8) : zero();
    transpose8(r);
    const R sc = set1(scale);
    if (n == 8) {
      for (int l = 0; l < lanes; ++l) store(dst[l], mul(r[l], sc));
    } else {
      const __m256i m = first_lanes(n);
      for (int l = 0; l < lanes; ++l) _mm256_maskstore_ps(dst[l], m, mul(r[l], sc));
    }
  }
  // The mask of lanes 0 .. n - 1.
  static __m256i first_lanes(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  // r[0..7] as an 8 x 8 block transposed: element j of r[i] goes to element
  // i of r[j]. Pairs of rows interleaved by 1 and 2 elements within each
  // 128-bit half, then the halves paired across registers 4 apart.
  static void transpose8(R* r) {
    R t[8], s[8];
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4)
      for (int j = 0; j < 2; ++j) {
        s[i + 2 * j] = _mm256_shuffle_ps(t[i + j], t[i + j + 2], 0x44);
        s[i + 2 * j + 1] = _mm256_shuffle_ps(t[i + j], t[i + j + 2], 0xEE);
      }
    for (int i = 0; i < 4; ++i) {
      r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
      r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
    }
  }
  // exp (Cephes expf, as vec_math.h's exp_simd<float>, 2^n built in the
  // exponent bits) of N registers in lock step: x[i] = exp(x[i]). x < -86.9
  // (and -inf) gives 0, x above 88.72 what 88.72 gives, NaN stays NaN (min
  // returns its second operand where one is NaN). An x below -86.9 goes
  // through the steps as 0, as in exp_simd, where a clamp to -86.9 would make
  // p 2^(n-1) subnormal: a microcode assist for every masked score.
  //
  // Why N at a time: one exp is a chain of about 15 dependent operations of
  // 3-5 cycles each, and a core with 128-bit units (Zen 1: two operations
  // for each 256-bit one) schedules from a window that holds about one such
  // chain. One exp after another left the softmax passes waiting on latency
  // (35 cycles a register measured there); 4 in lock step took 20, with the
  // same results.
  template <int N>
  static void exp_n(R* x) {
    R r[N], p[N], scale[N];  // scale = 2^(n-1), 0 where x < -86.9
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) {
      const R below = _mm256_cmp_ps(x[i], set1(-86.9f), _CMP_LT_OQ);
      const R xc = _mm256_min_ps(set1(88.7228394f), _mm256_andnot_ps(below, x[i]));
      const R n = _mm256_round_ps(_mm256_mul_ps(xc, set1(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r[i] = _mm256_fnmadd_ps(n, set1(0.693359375f), xc);
      r[i] = _mm256_fnmadd_ps(n, set1(-2.12194440e-4f), r[i]);
      const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126));
      scale[i] = _mm256_andnot_ps(below, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
    }
    cephes_exp_poly<VecAvx2, N>(r, p);
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) {  // below -86.9, p is e^0 = 1 and scale 0: the result is 0
      x[i] = _mm256_mul_ps(_mm256_mul_ps(p[i], scale[i]), set1(2.0f));
    }
  }
  static R exp(R x) {
    exp_n<1>(&x);
    return x;
  }
  // exp_simd<float> (vec_math.h) step by step as GCC compiles the
  // reference's loop for a CPU with FMA, for the row statistics: n by the
  // shifter trick with its product and sum fused, r = x - n C1 - n C2 and the
  // polynomial in FMAs, its last step (p r) r + r fused and then + 1. exp()
  // above rounds n from a rounded product and fuses the last step
  // differently: with it log_sum_exp drifted from the reference's by up to
  // 2e-9 relative on short rows, four times what the AVX-512 form does.
  // Its inputs are x - max of a row: at most 0, or NaN (an infinite logit
  // less itself, or one NaN), so exp_simd's clamp at log(FLT_MAX), its
  // infinity and its NaN blend are left out: a NaN carries through the
  // arithmetic and makes the row's sum NaN, as exp_simd's NaN does. Below
  // -86.9 the input goes through as 0 and its result is masked to 0, by
  // `andnot` rather than a blend (one micro-op where vblendvps takes two on
  // Intel's cores). 6.27 -> 5.05 us a row of 8,000 (one thread, AVX2 on an
  // Intel Xeon model 167, 2026-12-03), the same bits.
  static R stats_exp(R x) {
    const R below = _mm256_cmp_ps(x, set1(-86.9f), _CMP_LT_OQ);
    const R xc = _mm256_andnot_ps(below, x);
    const R shifter = set1(12582912.0f);
    const R n = _mm256_sub_ps(_mm256_fmadd_ps(xc, set1(1.44269504088896341f), shifter), shifter);
    R r = _mm256_fnmadd_ps(n, set1(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, set1(-2.12194440e-4f), r);
    R p = set1(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, set1(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, set1(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, set1(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, set1(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, set1(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), set1(1.0f));
    // 2^n as 2^(n-1) * 2, as exp_simd.
    const __m256i e = _mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(126));
    const R scale = _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
    return _mm256_andnot_ps(below, _mm256_mul_ps(_mm256_mul_ps(p, scale), set1(2.0f)));
  }
  // exp of N registers in lock step for the tiled forward's online softmax
  // alone, as VecAvx512::softmax_exp_n: 2^t, t = x log2(e) split into n =
  // round(t) and f = t - n, a degree-5 polynomial for 2^f, 2^n built in the
  // exponent bits; 15 operations where exp_n takes 22. Within 3e-7 + 8e-8 |x|
  // of std::exp on [-86.9, 88.0] (the softmax passes x <= 0; above, 2^n
  // overflows the exponent bits); x < -86.9 (and -inf) gives 0, NaN stays
  // NaN. Not exp's bits.
  template <int N>
  static void softmax_exp_n(R* x) {
    R n[N], f[N], p[N], scale[N];  // scale = 2^n, 0 where x < -86.9
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) {
      const R below = _mm256_cmp_ps(x[i], set1(-86.9f), _CMP_LT_OQ);
      const R t = _mm256_mul_ps(_mm256_andnot_ps(below, x[i]), set1(1.44269504088896341f));
      n[i] = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      f[i] = _mm256_sub_ps(t, n[i]);
      const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n[i]), _mm256_set1_epi32(127));
      scale[i] = _mm256_andnot_ps(below, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
    }
    exp2_fraction_poly<VecAvx2, N>(f, p);
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) x[i] = _mm256_mul_ps(p[i], scale[i]);
  }
  // 32-bit integer lanes, W a register (the Philox words, philox_kernel.h).
  using I = __m256i;
  static I set1_u32(std::uint32_t u) { return _mm256_set1_epi32(static_cast<int>(u)); }
  // The low and high words of the 64-bit counters ctr0 + lane. The carry
  // out of the low words, lo < ctr0's unsigned: a signed compare with both
  // sign bits flipped; -1 where it carries, so hi - carry.
  static void count_from(std::uint64_t ctr0, I& lo, I& hi) {
    const I first = set1_u32(static_cast<std::uint32_t>(ctr0));
    lo = _mm256_add_epi32(first, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const I sign = set1_u32(0x80000000u);
    const I carry = _mm256_cmpgt_epi32(_mm256_xor_si256(first, sign), _mm256_xor_si256(lo, sign));
    hi = _mm256_sub_epi32(set1_u32(static_cast<std::uint32_t>(ctr0 >> 32)), carry);
  }
  // hi (returned) and lo of the 32 x 32 -> 64-bit products a * m per lane:
  // even lanes by one vpmuludq, odd lanes (swapped down) by another;
  // vpblendd where AVX-512 has masked blends.
  static I mul_hi_lo(I a, I m, I* lo) {
    const I even = _mm256_mul_epu32(a, m);
    const I odd = _mm256_mul_epu32(_mm256_shuffle_epi32(a, 0xB1), m);
    *lo = _mm256_blend_epi32(even, _mm256_shuffle_epi32(odd, 0xB1), 0xAA);
    return _mm256_blend_epi32(_mm256_shuffle_epi32(even, 0xB1), odd, 0xAA);
  }
  static I xor3(I a, I b, I c) { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); }
  // a's and b's words interleaved (vpunpck{l,h}dq), then their pairs of
  // words (vpunpck{l,h}qdq), within each 128-bit lane.
  static void unpack32(I a, I b, I& lo, I& hi) {
    lo = _mm256_unpacklo_epi32(a, b);
    hi = _mm256_unpackhi_epi32(a, b);
  }
  static void unpack64(I a, I b, I& lo, I& hi) {
    lo = _mm256_unpacklo_epi64(a, b);
    hi = _mm256_unpackhi_epi64(a, b);
  }
  // out from four registers whose 128-bit lane l of u_j holds quad 4 l + j
  // (a 4 x W transpose's last step): the permutes pair quads 0-1, 2-3, 4-5,
  // 6-7.
  static void store_quads(I u0, I u1, I u2, I u3, std::uint32_t* out) {
    auto* o = reinterpret_cast<I*>(out);
    _mm256_storeu_si256(o, _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
  }
};

}  // namespace
}  // namespace attn::detail
