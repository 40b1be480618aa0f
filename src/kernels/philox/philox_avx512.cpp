// The Philox words of kernels/philox/philox.h in 16 lanes of AVX-512, compiled for AVX-512 F
// whatever the build targets and called only where the CPU has it.
#include <immintrin.h>

#include <cstdint>

#include "kernels/philox/philox.h"
#include "kernels/philox/philox_inline.h"
#include "kernels/target.h"

namespace attn::detail {

ATTN_TARGET_BEGIN_AVX512("avx512f")

namespace {

// hi and lo of the 32 x 32 -> 64-bit products a * m, per 32-bit lane: even
// lanes by one vpmuludq, odd lanes (swapped down) by another; the swaps are
// shuffles, not shifts, to leave the multiplier's port to the products.
inline __m512i mul_hi_lo(__m512i a, __m512i m, __m512i* lo) {
  const __m512i even = _mm512_mul_epu32(a, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_shuffle_epi32(a, _MM_PERM_CDAB), m);
  *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_shuffle_epi32(odd, _MM_PERM_CDAB));
  return _mm512_mask_blend_epi32(0xAAAA, _mm512_shuffle_epi32(even, _MM_PERM_CDAB), odd);
}

// Counters ctr0 .. ctr0 + 15 into out[0, 64).
inline void philox16(std::uint64_t ctr0, std::uint64_t key, std::uint32_t* out) {
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

void words(std::uint64_t ctr0, std::uint64_t key, std::int64_t n, std::uint32_t* out) {
  std::int64_t j = 0;
  for (; j + 16 <= n; j += 16) philox16(ctr0 + static_cast<std::uint64_t>(j), key, out + 4 * j);
  for (; j < n; ++j) philox_inline(ctr0 + static_cast<std::uint64_t>(j), key, out + 4 * j);
}

}  // namespace

ATTN_TARGET_END_AVX512

void philox_words_avx512(std::uint64_t ctr0, std::uint64_t key, std::int64_t n,
                         std::uint32_t* out) {
  words(ctr0, key, n, out);
}

}  // namespace attn::detail
