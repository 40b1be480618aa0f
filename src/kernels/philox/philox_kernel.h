// src/kernels/philox/philox_kernel.h — internal: Philox4x32-10 for W
// counters at once, written once over a vector type P (kernels/vec/:
// VecAvx2's 8 lanes in philox_avx2.cpp, VecAvx512's 16 in
// philox_avx512.cpp), the same words as philox_inline. P gives:
//   I, W                         the register of W 32-bit lanes
//   set1_u32(u)
//   count_from(ctr0, c0, c1)     the low and high words of ctr0 .. ctr0 + W - 1
//   mul_hi_lo(a, m, &lo)         hi (returned) and lo of the 32 x 32-bit products
//   xor3(a, b, c)                a ^ b ^ c
//   unpack32(a, b, lo, hi)       vpunpck{l,h}dq: a's and b's words interleaved
//   unpack64(a, b, lo, hi)       vpunpck{l,h}qdq: their pairs of words
//   store_quads(u0, .., u3, out) out from the unpacked words: the 128-bit
//                                lanes in counter order
// Included after its target pragma; ATTN_PHILOX_KERNELS makes the instance
// inside the region, ATTN_PHILOX_ENTRIES the entry after it (internal
// linkage inside: kernels/target.h).
#pragma once

#include <cstdint>

#include "kernels/philox/philox_inline.h"

namespace attn::detail {
namespace {

// Counters ctr0 .. ctr0 + W - 1 into out[0, 4 W).
template <class P>
inline void philox_lanes(std::uint64_t ctr0, std::uint64_t key, std::uint32_t* out) {
  using I = typename P::I;
  const I m0 = P::set1_u32(kPhiloxM0), m1 = P::set1_u32(kPhiloxM1);
  I c0, c1;
  P::count_from(ctr0, c0, c1);
  I c2 = P::set1_u32(0), c3 = c2;
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    I lo0, lo1;
    const I hi0 = P::mul_hi_lo(c0, m0, &lo0);
    const I hi1 = P::mul_hi_lo(c2, m1, &lo1);
    c0 = P::xor3(hi1, c1, P::set1_u32(k0));
    c1 = lo1;
    c2 = P::xor3(hi0, c3, P::set1_u32(k1));
    c3 = lo0;
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  // Word w of counter i to out[4 i + w], a 4 x W transpose: after the
  // unpacks, 128-bit lane l of u_j holds counter 4 l + j.
  I t0, t1, t2, t3, u0, u1, u2, u3;
  P::unpack32(c0, c1, t0, t1);
  P::unpack32(c2, c3, t2, t3);
  P::unpack64(t0, t2, u0, u1);
  P::unpack64(t1, t3, u2, u3);
  P::store_quads(u0, u1, u2, u3, out);
}

// Counters ctr0 .. ctr0 + n - 1 into out[0, 4 n): W at a time, the rest one
// by one.
template <class P>
void philox_words(std::uint64_t ctr0, std::uint64_t key, std::int64_t n, std::uint32_t* out) {
  std::int64_t j = 0;
  for (; j + P::W <= n; j += P::W)
    philox_lanes<P>(ctr0 + static_cast<std::uint64_t>(j), key, out + 4 * j);
  for (; j < n; ++j) philox_inline(ctr0 + static_cast<std::uint64_t>(j), key, out + 4 * j);
}

}  // namespace
}  // namespace attn::detail

#define ATTN_PHILOX_KERNELS(isa, P)                                                             \
  namespace attn::detail {                                                                      \
  namespace {                                                                                   \
  void words_##isa(std::uint64_t ctr0, std::uint64_t key, std::int64_t n, std::uint32_t* out) { \
    philox_words<P>(ctr0, key, n, out);                                                         \
  }                                                                                             \
  }                                                                                             \
  }

#define ATTN_PHILOX_ENTRIES(isa)                                                 \
  namespace attn::detail {                                                       \
  void philox_words_##isa(std::uint64_t ctr0, std::uint64_t key, std::int64_t n, \
                          std::uint32_t* out) {                                  \
    words_##isa(ctr0, key, n, out);                                              \
  }                                                                              \
  }
