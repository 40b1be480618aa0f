// The Philox words of ops/philox.h: the plain loop, and the AVX-512 and AVX2
// ones, each compiled for its instruction set whatever the build targets and
// chosen at run time.
#include "ops/philox.h"

#include <immintrin.h>

#include "ops/philox_inline.h"

namespace attn::detail {

void philox_words_reference(std::uint64_t ctr0, std::uint64_t key, std::int64_t n,
                            std::uint32_t* out) {
#pragma omp simd
  for (std::int64_t j = 0; j < n; ++j)
    philox_inline(ctr0 + static_cast<std::uint64_t>(j), key, out + 4 * j);
}

// GCC 12 warns inside its own AVX-512 intrinsics (GCC bug 105593; as in
// f32_gemm.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

#define ATTN_AVX512 __attribute__((target("avx512f")))

// hi and lo of the 32 x 32 -> 64-bit products a * m, per 32-bit lane: even
// lanes by one vpmuludq, odd lanes (swapped down) by another; the swaps are
// shuffles, not shifts, to leave the multiplier's port to the products.
ATTN_AVX512 inline __m512i mul_hi_lo(__m512i a, __m512i m, __m512i* lo) {
  const __m512i even = _mm512_mul_epu32(a, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_shuffle_epi32(a, _MM_PERM_CDAB), m);
  *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_shuffle_epi32(odd, _MM_PERM_CDAB));
  return _mm512_mask_blend_epi32(0xAAAA, _mm512_shuffle_epi32(even, _MM_PERM_CDAB), odd);
}

// Counters ctr0 .. ctr0 + 15 into out[0, 64).
ATTN_AVX512 inline void philox16(std::uint64_t ctr0, std::uint64_t key, std::uint32_t* out) {
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i lo = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(ctr0)));
  // The counters' low words, and their high words with the carry out of the low ones.
  __m512i c0 = _mm512_add_epi32(lo, iota);
  const __mmask16 carry = _mm512_cmplt_epu32_mask(c0, lo);
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(ctr0 >> 32)));
  __m512i c1 = _mm512_mask_add_epi32(hi, carry, hi, _mm512_set1_epi32(1));
  __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    __m512i lo0, lo1;
    const __m512i hi0 = mul_hi_lo(c0, m0, &lo0);
    const __m512i hi1 = mul_hi_lo(c2, m1, &lo1);
    // a ^ b ^ c in one instruction (truth table 0x96).
    c0 = _mm512_ternarylogic_epi32(hi1, c1, _mm512_set1_epi32(static_cast<int>(k0)), 0x96);
    c1 = lo1;
    c2 = _mm512_ternarylogic_epi32(hi0, c3, _mm512_set1_epi32(static_cast<int>(k1)), 0x96);
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Word w of counter i to out[4 i + w]: a 4 x 16 transpose. After the
  // unpacks, 128-bit lane l of u_j holds counter 4 l + j; the shuffles
  // gather counters 0-3, 4-7, 8-11, 12-15.
  const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
  const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
  const __m512i v2 = _mm512_shuffle_i32x4(u0, u1, 0xEE), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
  _mm512_storeu_si512(out, _mm512_shuffle_i32x4(v0, v1, 0x88));
  _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(v0, v1, 0xDD));
  _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(v2, v3, 0x88));
  _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(v2, v3, 0xDD));
}

ATTN_AVX512 void philox_words_avx512(std::uint64_t ctr0, std::uint64_t key, std::int64_t n,
                                     std::uint32_t* out) {
  std::int64_t j = 0;
  for (; j + 16 <= n; j += 16) philox16(ctr0 + static_cast<std::uint64_t>(j), key, out + 4 * j);
  for (; j < n; ++j) philox_inline(ctr0 + static_cast<std::uint64_t>(j), key, out + 4 * j);
}

#undef ATTN_AVX512

#define ATTN_AVX2 __attribute__((target("avx2")))

// mul_hi_lo in 8 lanes: vpblendd where AVX-512 has masked blends.
ATTN_AVX2 inline __m256i mul_hi_lo8(__m256i a, __m256i m, __m256i* lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_shuffle_epi32(a, 0xB1), m);
  *lo = _mm256_blend_epi32(even, _mm256_shuffle_epi32(odd, 0xB1), 0xAA);
  return _mm256_blend_epi32(_mm256_shuffle_epi32(even, 0xB1), odd, 0xAA);
}

// Counters ctr0 .. ctr0 + 7 into out[0, 32), as philox16. (Two groups of 8
// side by side, their rounds interleaved, were no faster on a Zen 1: the
// rounds are bound by the vector pipes, not by the products' latency.)
ATTN_AVX2 inline void philox8(std::uint64_t ctr0, std::uint64_t key, std::uint32_t* out) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  const __m256i lo = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(ctr0)));
  __m256i c0 = _mm256_add_epi32(lo, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  // The carry out of the low words, c0 < lo unsigned: a signed compare with
  // both sign bits flipped; -1 where it carries, so hi - carry.
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(lo, sign), _mm256_xor_si256(c0, sign));
  __m256i c1 = _mm256_sub_epi32(
      _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(ctr0 >> 32))), carry);
  __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    __m256i lo0, lo1;
    const __m256i hi0 = mul_hi_lo8(c0, m0, &lo0);
    const __m256i hi1 = mul_hi_lo8(c2, m1, &lo1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    c1 = lo1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // A 4 x 8 transpose: after the unpacks, 128-bit half h of u_j holds
  // counter 4 h + j; the permutes pair counters 0-1, 2-3, 4-5, 6-7.
  const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
  const __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  auto* o = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(o, _mm256_permute2x128_si256(u0, u1, 0x20));
  _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
  _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
  _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
}

ATTN_AVX2 void philox_words_avx2(std::uint64_t ctr0, std::uint64_t key, std::int64_t n,
                                 std::uint32_t* out) {
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) philox8(ctr0 + static_cast<std::uint64_t>(j), key, out + 4 * j);
  for (; j < n; ++j) philox_inline(ctr0 + static_cast<std::uint64_t>(j), key, out + 4 * j);
}

#undef ATTN_AVX2

}  // namespace

#pragma GCC diagnostic pop

bool philox_cpu_has(VecForm form) {
  switch (form) {
    case VecForm::reference: return true;
    case VecForm::avx2: return __builtin_cpu_supports("avx2") != 0;
    case VecForm::avx512: return __builtin_cpu_supports("avx512f") != 0;
  }
  return false;
}

void philox_words_on(VecForm form, std::uint64_t ctr0, std::uint64_t key, std::int64_t n,
                     std::uint32_t* out) {
  switch (form) {
    case VecForm::avx512: return philox_words_avx512(ctr0, key, n, out);
    case VecForm::avx2: return philox_words_avx2(ctr0, key, n, out);
    case VecForm::reference: break;
  }
  philox_words_reference(ctr0, key, n, out);
}

void philox_words(std::uint64_t ctr0, std::uint64_t key, std::int64_t n, std::uint32_t* out) {
  // Every form gives the same words, so the CPU alone decides (as for
  // row_stats); each form has a test of its own.
  static const VecForm form = philox_cpu_has(VecForm::avx512) ? VecForm::avx512
                              : philox_cpu_has(VecForm::avx2) ? VecForm::avx2
                                                              : VecForm::reference;
  philox_words_on(form, ctr0, key, n, out);
}

}  // namespace attn::detail
