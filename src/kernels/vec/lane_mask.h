// src/kernels/vec/lane_mask.h — internal: the AVX-512 mask of a register's
// first n lanes of 16 (the values that exist at a row's end), for the
// kernels that mask their loads and stores. Plain integer code: callable
// from any target region.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace attn::detail {

// Lanes [0, n) of 16: none for n <= 0, all for n >= 16.
inline __mmask16 first_lanes16(std::int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u);
}

}  // namespace attn::detail
