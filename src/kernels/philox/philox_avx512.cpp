// The Philox words of kernels/philox/philox.h in 16 lanes of AVX-512
// (philox_kernel.h over Lanes16), compiled for AVX-512 F whatever the build
// targets and called only where the CPU has it.
#include <immintrin.h>

#include <cstdint>

#include "kernels/philox/philox.h"
#include "kernels/philox/philox_inline.h"
#include "kernels/target.h"

ATTN_TARGET_BEGIN_AVX512("avx512f")
#include "kernels/philox/philox_kernel.h"

namespace attn::detail {
namespace {

struct Lanes16 {
  using I = __m512i;
  static constexpr int W = 16;
  static I set1(std::uint32_t u) { return _mm512_set1_epi32(static_cast<int>(u)); }
  static I zero() { return _mm512_setzero_si512(); }
  // Even lanes by one vpmuludq, odd lanes (swapped down) by another; the
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
  static void unpack32(I a, I b, I& lo, I& hi) {
    lo = _mm512_unpacklo_epi32(a, b);
    hi = _mm512_unpackhi_epi32(a, b);
  }
  static void unpack64(I a, I b, I& lo, I& hi) {
    lo = _mm512_unpacklo_epi64(a, b);
    hi = _mm512_unpackhi_epi64(a, b);
  }
  // Lane l of u_j holds counter 4 l + j: the shuffles gather counters 0-3,
  // 4-7, 8-11, 12-15.
  static void store_quads(I u0, I u1, I u2, I u3, std::uint32_t* out) {
    const I v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
    const I v2 = _mm512_shuffle_i32x4(u0, u1, 0xEE), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
    _mm512_storeu_si512(out, _mm512_shuffle_i32x4(v0, v1, 0x88));
    _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(v0, v1, 0xDD));
    _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(v2, v3, 0x88));
    _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(v2, v3, 0xDD));
  }
  // The low words, and the high words with the carry out of the low ones.
  static void counters(std::uint64_t ctr0, I& c0, I& c1) {
    const I lo = set1(static_cast<std::uint32_t>(ctr0));
    c0 = _mm512_add_epi32(lo,
                          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __mmask16 carry = _mm512_cmplt_epu32_mask(c0, lo);
    const I hi = set1(static_cast<std::uint32_t>(ctr0 >> 32));
    c1 = _mm512_mask_add_epi32(hi, carry, hi, set1(1));
  }
};

}  // namespace
}  // namespace attn::detail

ATTN_PHILOX_KERNELS(avx512, Lanes16)
ATTN_TARGET_END_AVX512

ATTN_PHILOX_ENTRIES(avx512)
