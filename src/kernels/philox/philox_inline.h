// src/kernels/philox/philox_inline.h — Philox4x32-10 inlined, for kernels that make
// dropout masks (ops dropout, the fused attention kernels).
//
// The same function as core's attn::philox4x32 (core/rng.cpp) for counter
// (ctr, 0): defined inline here so that the compiler vectorizes it across
// counters inside a kernel's loop.
#pragma once

#include <cstdint>

namespace attn::detail {

// Philox4x32's multipliers and its key's increments (Salmon et al., 2011),
// for this function and the vector forms (philox_kernel.h).
inline constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

inline void philox_inline(std::uint64_t ctr, std::uint64_t key, std::uint32_t* out) {
  constexpr std::uint32_t kM0 = kPhiloxM0, kM1 = kPhiloxM1;
  constexpr std::uint32_t kW0 = kPhiloxW0, kW1 = kPhiloxW1;
  std::uint32_t c0 = static_cast<std::uint32_t>(ctr), c1 = static_cast<std::uint32_t>(ctr >> 32);
  std::uint32_t c2 = 0, c3 = 0;
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * c0;
    std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * c2;
    std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

}  // namespace attn::detail
