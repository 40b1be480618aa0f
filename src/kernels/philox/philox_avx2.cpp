// The Philox words of kernels/philox/philox.h in 8 lanes of AVX2
// (philox_kernel.h over Lanes8), compiled for AVX2 whatever the build targets
// and called only where the CPU has it. (Two groups of 8 side by side, their
// rounds interleaved, were no faster on a Zen 1: the rounds are bound by the
// vector pipes, not by the products' latency.)
#include <immintrin.h>

#include <cstdint>

#include "kernels/philox/philox.h"
#include "kernels/philox/philox_inline.h"
#include "kernels/target.h"

ATTN_TARGET_BEGIN("avx2")
#include "kernels/philox/philox_kernel.h"

namespace attn::detail {
namespace {

struct Lanes8 {
  using I = __m256i;
  static constexpr int W = 8;
  static I set1(std::uint32_t u) { return _mm256_set1_epi32(static_cast<int>(u)); }
  static I zero() { return _mm256_setzero_si256(); }
  // Even lanes by one vpmuludq, odd lanes (swapped down) by another; vpblendd
  // where AVX-512 has masked blends.
  static I mul_hi_lo(I a, I m, I* lo) {
    const I even = _mm256_mul_epu32(a, m);
    const I odd = _mm256_mul_epu32(_mm256_shuffle_epi32(a, 0xB1), m);
    *lo = _mm256_blend_epi32(even, _mm256_shuffle_epi32(odd, 0xB1), 0xAA);
    return _mm256_blend_epi32(_mm256_shuffle_epi32(even, 0xB1), odd, 0xAA);
  }
  static I xor3(I a, I b, I c) { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); }
  static void unpack32(I a, I b, I& lo, I& hi) {
    lo = _mm256_unpacklo_epi32(a, b);
    hi = _mm256_unpackhi_epi32(a, b);
  }
  static void unpack64(I a, I b, I& lo, I& hi) {
    lo = _mm256_unpacklo_epi64(a, b);
    hi = _mm256_unpackhi_epi64(a, b);
  }
  // Half h of u_j holds counter 4 h + j: the permutes pair counters 0-1,
  // 2-3, 4-5, 6-7.
  static void store_quads(I u0, I u1, I u2, I u3, std::uint32_t* out) {
    auto* o = reinterpret_cast<I*>(out);
    _mm256_storeu_si256(o, _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
  }
  // The carry out of the low words, c0 < lo unsigned: a signed compare with
  // both sign bits flipped; -1 where it carries, so hi - carry.
  static void counters(std::uint64_t ctr0, I& c0, I& c1) {
    const I lo = set1(static_cast<std::uint32_t>(ctr0));
    c0 = _mm256_add_epi32(lo, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const I sign = set1(0x80000000u);
    const I carry = _mm256_cmpgt_epi32(_mm256_xor_si256(lo, sign), _mm256_xor_si256(c0, sign));
    c1 = _mm256_sub_epi32(set1(static_cast<std::uint32_t>(ctr0 >> 32)), carry);
  }
};

}  // namespace
}  // namespace attn::detail

ATTN_PHILOX_KERNELS(avx2, Lanes8)
ATTN_TARGET_END

ATTN_PHILOX_ENTRIES(avx2)
