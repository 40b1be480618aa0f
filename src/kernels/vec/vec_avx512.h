// src/kernels/vec/vec_avx512.h — internal: the AVX-512 f32 vector type of
// the attention kernels (the V of attention_common.h) and of the row
// statistics (row_stats_kernel.h) and the Philox words
// (philox_kernel.h). Included, after their target pragma, by
// attention_avx512.cpp, attention_avx512_bf16.cpp and row_stats_avx512.cpp.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/vec/vec_exp_poly.h"

namespace attn::detail {
namespace {

struct VecAvx512 {
  using T = float;
  using R = __m512;
  static constexpr int W = 16;
  static constexpr int kMR = 6, kNV = 4;
  // The forward's products (K = the head dim, or a key tile) run best taller:
  // 8 rows by 3 registers, with query tiles of 48 (docs/design/attention.md).
  static constexpr int kFwdMR = 8, kFwdNV = 3;
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
  static float hmax(R x) { return _mm512_reduce_max_ps(x); }
  // max(x, m), m where either is NaN (vmaxps returns its second operand).
  // The masked form: GCC 12 warns of _mm512_max_ps's unset pass-through
  // register.
  static R max_keep(R x, R m) { return _mm512_mask_max_ps(m, 0xFFFF, x, m); }
  // The lanes where x >= t, as the low bits of an int.
  static unsigned ge_mask(R x, R t) { return _mm512_cmp_ps_mask(x, t, _CMP_GE_OQ); }
  // Doubles, W / 2 a register: a register's low and high lanes widened.
  using D = __m512d;
  static D zero_d() { return _mm512_setzero_pd(); }
  static D add_d(D a, D b) { return _mm512_add_pd(a, b); }
  static D low_d(R x) { return _mm512_cvtps_pd(_mm512_castps512_ps256(x)); }
  static D high_d(R x) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
  }
  static void store_d(double* p, D x) { _mm512_storeu_pd(p, x); }
  // The 16 horizontal sums of a[0..15] as one vector (lane j: the sum of
  // a[j]'s lanes): four levels of adjacent pairs added, each pair of vectors
  // becoming one (x's halved lanes, then y's), 30 permutes and 15 adds in
  // all against 16 separate reductions. The decode kernel's scores.
  static R lane_sums(const R* a) {
    R l1[8], l2[4];
    for (int i = 0; i < 8; ++i) l1[i] = pair_sums(a[2 * i], a[2 * i + 1]);
    for (int i = 0; i < 4; ++i) l2[i] = pair_sums(l1[2 * i], l1[2 * i + 1]);
    return pair_sums(pair_sums(l2[0], l2[1]), pair_sums(l2[2], l2[3]));
  }
  // Lanes 0-7: x's lanes added in adjacent pairs; lanes 8-15: y's.
  static R pair_sums(R x, R y) {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_add_ps(_mm512_permutex2var_ps(x, even, y), _mm512_permutex2var_ps(x, odd, y));
  }
  // Lane interleaving of one block of 16 rows, through a 16 x 16 transpose
  // in registers (pairs of rows interleaved by 1, 2, 4 and 8 elements):
  // dst[j * 16 + l] = scale * src[l][j] for l < 16, j < n <= 16. Masked
  // loads read n elements of each row and nothing past them.
  static void interleave(const float* const* src, int n, float scale, float* dst) {
    if (n <= 8) return interleave8(src, n, scale, dst);
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    R r[16];
    for (int l = 0; l < 16; ++l) r[l] = _mm512_maskz_loadu_ps(m, src[l]);
    transpose16(r);
    const R sc = set1(scale);
    for (int j = 0; j < n; ++j) store(dst + j * 16, mul(r[j], sc));
  }
  // The reverse for the first `lanes` rows: dst[l][j] = scale * src[j * 16 +
  // l] for l < lanes, j < n <= 16; nothing else is written.
  static void deinterleave(const float* src, int n, float scale, float* const* dst, int lanes) {
    if (n <= 8) return deinterleave8(src, n, scale, dst, lanes);
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    R r[16];
    for (int j = 0; j < 16; ++j) r[j] = j < n ? load(src + j * 16) : zero();
    transpose16(r);
    const R sc = set1(scale);
    for (int l = 0; l < lanes; ++l) _mm512_mask_storeu_ps(dst[l], m, mul(r[l], sc));
  }
  // interleave for n <= 8 (the small path's head dim 8): half the shuffles
  // of transpose16, as two 8 x 8 transposes side by side, rows l and l + 8
  // in the two halves of register l.
  static void interleave8(const float* const* src, int n, float scale, float* dst) {
    const __mmask8 m = static_cast<__mmask8>((1u << n) - 1);
    R r[8];
    for (int l = 0; l < 8; ++l)
      r[l] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_maskz_loadu_ps(m, src[l])),
                                _mm256_maskz_loadu_ps(m, src[l + 8]), 1);
    transpose8x2(r);
    const R sc = set1(scale);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j)
      if (j < n) store(dst + j * 16, mul(r[j], sc));
  }
  // deinterleave for n <= 8: the same two 8 x 8 transposes.
  static void deinterleave8(const float* src, int n, float scale, float* const* dst, int lanes) {
    const __mmask8 m = static_cast<__mmask8>((1u << n) - 1);
    R r[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) r[j] = j < n ? load(src + j * 16) : zero();
    transpose8x2(r);
    const R sc = set1(scale);
    for (int l = 0; l < lanes; ++l) {
      const R v = mul(r[l & 7], sc);
      _mm256_mask_storeu_ps(dst[l], m,
                            l < 8 ? _mm512_castps512_ps256(v) : _mm512_extractf32x8_ps(v, 1));
    }
  }
  // The first two levels of both transposes, on r[0..N): in each 128-bit
  // lane, every group of 4 registers turned from rows into columns (pairs of
  // rows interleaved by 1, then by 2 elements).
  template <int N>
  static void transpose_lanes4(R* r) {
    R t[N];
    for (int i = 0; i < N; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < N; i += 4)
      for (int j = 0; j < 2; ++j) {
        const __m512d a = _mm512_castps_pd(t[i + j]), b = _mm512_castps_pd(t[i + j + 2]);
        r[i + 2 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        r[i + 2 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
      }
  }
  // Each 256-bit half of r[0..7] transposed as an 8 x 8 block: element j of
  // half h of r[i] goes to element i of half h of r[j].
  static void transpose8x2(R* r) {
    transpose_lanes4<8>(r);
    // r[0..3] hold rows 0-3, r[4..7] rows 4-7 of each half's columns in
    // their 128-bit lanes; the last step pairs those lanes across the two.
    const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    const __m512i hi =
        _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    R t[8];
    for (int i = 0; i < 4; ++i) {
      t[i] = _mm512_permutex2var_ps(r[i], lo, r[i + 4]);
      t[i + 4] = _mm512_permutex2var_ps(r[i], hi, r[i + 4]);
    }
    for (int i = 0; i < 8; ++i) r[i] = t[i];
  }
  static void transpose16(R* r) {
    transpose_lanes4<16>(r);
    R t[16];
    for (int i = 0; i < 16; i += 8)
      for (int j = 0; j < 4; ++j) {
        t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
        t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
      }
    for (int j = 0; j < 8; ++j) {
      r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
      r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
    }
  }
  // exp as vec_math.h's exp_simd<float> (Cephes expf: x = n ln2 + r, a degree-7
  // polynomial for e^r), with 2^n applied by scalef, of N registers in lock
  // step: x[i] = exp(x[i]). x < -86.9 (and -inf) gives 0. scalef takes any n,
  // so Cephes' clamps of x are not needed: the same bits on [-86.9, 88.72],
  // inf above, NaN stays NaN, as exp_simd's. N at a time for the same reason
  // as VecAvx2::exp_n: each exp is one long dependent chain.
  template <int N>
  static void exp_n(R* x) {
    R n[N], r[N], p[N];
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) {
      n[i] = _mm512_roundscale_ps(_mm512_mul_ps(x[i], set1(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r[i] = _mm512_fnmadd_ps(n[i], set1(0.693359375f), x[i]);
      r[i] = _mm512_fnmadd_ps(n[i], set1(-2.12194440e-4f), r[i]);
    }
    cephes_exp_poly<VecAvx512, N>(r, p);
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) {
      const __mmask16 below = _mm512_cmp_ps_mask(x[i], set1(-86.9f), _CMP_LT_OQ);
      x[i] = _mm512_maskz_scalef_ps(static_cast<__mmask16>(~below), p[i], n[i]);
    }
  }
  static R exp(R x) {
    exp_n<1>(&x);
    return x;
  }
  // The row statistics' exp: exp itself (its last bit may differ from
  // exp_simd's: the polynomial's last step fused differently).
  static R stats_exp(R x) { return exp(x); }
  // exp of N registers in lock step for the tiled forward's online softmax
  // alone (attention_common.h, exp_block): 2^t with t = x log2(e) rounded to
  // f32, split into n = round(t) and f = t - n in [-1/2, 1/2] (exact), 2^f by
  // a degree-5 polynomial (Chebyshev interpolation, 2.4e-7 relative in f32
  // Horner), 2^n by scalef: 10 instructions where exp takes 14. The rounding
  // of t and of log2(e) adds up to 8e-8 |x| relative, which matters only for
  // weights far below their row's largest (x = score - max): within 3e-7 +
  // 8e-8 |x| of std::exp on [-86.9, 88.72]; x < -86.9 (and -inf) gives 0, NaN
  // stays NaN. Not exp's bits (the small path, decoding and the backward keep
  // exp; the backward's P, exp(S - lse), agrees with this P to f32 rounding).
  template <int N>
  static void softmax_exp_n(R* x) {
    R n[N], f[N], p[N];
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) {
      const R t = _mm512_mul_ps(x[i], set1(1.44269504088896341f));
      n[i] = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      f[i] = _mm512_sub_ps(t, n[i]);
    }
    exp2_fraction_poly<VecAvx512, N>(f, p);
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) {
      const __mmask16 below = _mm512_cmp_ps_mask(x[i], set1(-86.9f), _CMP_LT_OQ);
      x[i] = _mm512_maskz_scalef_ps(static_cast<__mmask16>(~below), p[i], n[i]);
    }
  }
  // 32-bit integer lanes, W a register (the Philox words, philox_kernel.h).
  using I = __m512i;
  static I set1_u32(std::uint32_t u) { return _mm512_set1_epi32(static_cast<int>(u)); }
  // The low and high words of the 64-bit counters ctr0 + lane, the carry
  // out of the low words added to the high ones.
  static void count_from(std::uint64_t ctr0, I& lo, I& hi) {
    const I first = set1_u32(static_cast<std::uint32_t>(ctr0));
    lo = _mm512_add_epi32(first,
                          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __mmask16 carry = _mm512_cmplt_epu32_mask(lo, first);
    const I high = set1_u32(static_cast<std::uint32_t>(ctr0 >> 32));
    hi = _mm512_mask_add_epi32(high, carry, high, set1_u32(1));
  }
  // hi (returned) and lo of the 32 x 32 -> 64-bit products a * m per lane:
  // even lanes by one vpmuludq, odd lanes (swapped down) by another; the
  // swaps are shuffles, not shifts, to leave the multiplier's port to the
  // products.
  static I mul_hi_lo(I a, I m, I* lo) {
    const I even = _mm512_mul_epu32(a, m);
    const I odd = _mm512_mul_epu32(_mm512_shuffle_epi32(a, _MM_PERM_CDAB), m);
    *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_shuffle_epi32(odd, _MM_PERM_CDAB));
    return _mm512_mask_blend_epi32(0xAAAA, _mm512_shuffle_epi32(even, _MM_PERM_CDAB), odd);
  }
  // One instruction (truth table 0x96).
  static I xor3(I a, I b, I c) { return _mm512_ternarylogic_epi32(a, b, c, 0x96); }
  // a's and b's words interleaved (vpunpck{l,h}dq), then their pairs of
  // words (vpunpck{l,h}qdq), within each 128-bit lane.
  static void unpack32(I a, I b, I& lo, I& hi) {
    lo = _mm512_unpacklo_epi32(a, b);
    hi = _mm512_unpackhi_epi32(a, b);
  }
  static void unpack64(I a, I b, I& lo, I& hi) {
    lo = _mm512_unpacklo_epi64(a, b);
    hi = _mm512_unpackhi_epi64(a, b);
  }
  // out from four registers whose 128-bit lane l of u_j holds quad 4 l + j
  // (a 4 x W transpose's last step): the shuffles gather quads 0-3, 4-7,
  // 8-11, 12-15.
  static void store_quads(I u0, I u1, I u2, I u3, std::uint32_t* out) {
    const I v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
    const I v2 = _mm512_shuffle_i32x4(u0, u1, 0xEE), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
    _mm512_storeu_si512(out, _mm512_shuffle_i32x4(v0, v1, 0x88));
    _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(v0, v1, 0xDD));
    _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(v2, v3, 0x88));
    _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(v2, v3, 0xDD));
  }
};

}  // namespace
}  // namespace attn::detail
