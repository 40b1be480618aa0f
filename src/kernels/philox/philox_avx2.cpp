// The Philox words of kernels/philox/philox.h in 8 lanes of AVX2, compiled for AVX2
// whatever the build targets and called only where the CPU has it.
#include <immintrin.h>

#include <cstdint>

#include "kernels/philox/philox.h"
#include "kernels/philox/philox_inline.h"
#include "kernels/target.h"

namespace attn::detail {

ATTN_TARGET_BEGIN("avx2")

namespace {

// mul_hi_lo in 8 lanes: vpblendd where AVX-512 has masked blends.
inline __m256i mul_hi_lo8(__m256i a, __m256i m, __m256i* lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_shuffle_epi32(a, 0xB1), m);
  *lo = _mm256_blend_epi32(even, _mm256_shuffle_epi32(odd, 0xB1), 0xAA);
  return _mm256_blend_epi32(_mm256_shuffle_epi32(even, 0xB1), odd, 0xAA);
}

// Counters ctr0 .. ctr0 + 7 into out[0, 32), as philox16. (Two groups of 8
// side by side, their rounds interleaved, were no faster on a Zen 1: the
// rounds are bound by the vector pipes, not by the products' latency.)
inline void philox8(std::uint64_t ctr0, std::uint64_t key, std::uint32_t* out) {
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

void words(std::uint64_t ctr0, std::uint64_t key, std::int64_t n, std::uint32_t* out) {
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) philox8(ctr0 + static_cast<std::uint64_t>(j), key, out + 4 * j);
  for (; j < n; ++j) philox_inline(ctr0 + static_cast<std::uint64_t>(j), key, out + 4 * j);
}

}  // namespace

ATTN_TARGET_END

void philox_words_avx2(std::uint64_t ctr0, std::uint64_t key, std::int64_t n, std::uint32_t* out) {
  words(ctr0, key, n, out);
}

}  // namespace attn::detail
