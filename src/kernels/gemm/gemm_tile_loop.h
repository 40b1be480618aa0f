// src/kernels/gemm/gemm_tile_loop.h — internal: the AVX-512 tiles' loop,
// written once for the f32, bf16 and int8 (VNNI) kernels: R rows (R <= 12)
// of one group of 32 columns, 2 R sums in registers over all of K, then
// each row out through the kernel's epilogue. Included after a kernel's
// target pragma (internal linkage, kernels/target.h); a kernel K gives:
//
//   Weight                      its weight registers (its arguments hold
//                               the activations a.x, rows a.ldx apart,
//                               and the packed weights a.packed)
//   kPerStep                    values of K a step holds (gemm_tiles.h)
//   zero()                      a zero sum register
//   weights(w, pf, w0, w1)      a step's two weight registers from w (and
//                               the prefetches that go with the step: pf,
//                               the weights a later tile reads, as far in)
//   row(xr, s, w0, w1, lo, hi)  one row's step: its values at step s of
//                               row xr against w0 and w1 into its sums
//   epilogue(a, n0), store(a, m, n0, lo, hi, e)
//                               the group's way out, and row m's (the
//                               float kernels': gemm_tiles::FloatOut)
//
// The per-row calls unroll by ATTN_GEMM_ROWS_12 into named sums (GCC kept an
// array's sums on the stack); inlined, they are the kernels' own
// instructions.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/gemm/gemm_tiles.h"

namespace attn::detail {
namespace {

// The 4 bytes of a row's step (two bf16 values, four u8) in every 32-bit
// lane: what the dot-product kernels multiply a step's weights by.
inline __m512i step_bytes(const void* p) {
  std::int32_t four;
  std::memcpy(&four, p, sizeof four);
  return _mm512_set1_epi32(four);
}

template <class K, int R, class Args, class Elem>
inline void tile_loop(const Args& a, std::int64_t m0, std::int64_t g, const Elem* pf) {
  static_assert(R >= 1 && R <= gemm_tiles::kTileRows);
  constexpr std::int64_t kStep = gemm_tiles::kGroup * K::kPerStep;
  const std::int64_t steps = (a.K + K::kPerStep - 1) / K::kPerStep;
  const Elem* w = a.packed + g * steps * kStep;
  const auto* x = a.x + m0 * a.ldx;
  const std::int64_t ld = a.ldx;
  const auto z = K::zero();
  ATTN_GEMM_ROWS_12(ATTN_GEMM_ZERO_SUMS)
  for (std::int64_t s = 0; s < steps; ++s) {
    typename K::Weight w0, w1;
    K::weights(w + s * kStep, pf + s * kStep, w0, w1);
#define ATTN_GEMM_ROW(r) \
  if constexpr (R > r) K::row(x + (r)*ld, s, w0, w1, lo##r, hi##r);
    ATTN_GEMM_ROWS_12(ATTN_GEMM_ROW)
#undef ATTN_GEMM_ROW
  }
  const std::int64_t n0 = g * gemm_tiles::kGroup;
  const auto e = K::epilogue(a, n0);
#define ATTN_GEMM_OUT(r) \
  if constexpr (R > r) K::store(a, m0 + (r), n0, lo##r, hi##r, e);
  ATTN_GEMM_ROWS_12(ATTN_GEMM_OUT)
#undef ATTN_GEMM_OUT
}

// The kernel's tiles as gemm_tiles::run_tiles calls them: a kernel K
// derives from TileLoop<K>. Not inlined: one function per tile height.
template <class K>
struct TileLoop {
  template <int R, class Args, class Elem>
  __attribute__((noinline)) static void tile(const Args& a, std::int64_t m0, std::int64_t g,
                                             const Elem* pf) {
    tile_loop<K, R>(a, m0, g, pf);
  }
};

}  // namespace
}  // namespace attn::detail
