// src/kernels/gemm/gemm_halves.h — internal: the tile of gemm_tiles on
// 256-bit registers, written once for the AVX2 f32 and AVX-VNNI int8
// kernels: R rows (R <= 12) of one group of 32 columns as blocks of up to 6
// rows, the group's first 16 columns, then its last 16 where N reaches
// them. A kernel K gives
//
//   template <int S> static void block(a, m0, g, h, pf)
//                           rows [m0, m0 + S) of columns 32 g + 16 h ...
//
// Included after a kernel's target pragma (internal linkage,
// kernels/target.h).
#pragma once

#include <cstdint>

#include "kernels/gemm/gemm_tiles.h"

namespace attn::detail {
namespace {

template <class K, int R, class Args, class Elem>
inline void tile_in_halves(const Args& a, std::int64_t m0, std::int64_t g, const Elem* pf) {
  static_assert(R >= 1 && R <= gemm_tiles::kTileRows);
  constexpr int kFirst = R <= 6 ? R : (R + 1) / 2, kSecond = R - kFirst;
  const std::int64_t halves = a.N - g * gemm_tiles::kGroup > 16 ? 2 : 1;
  for (std::int64_t h = 0; h < halves; ++h) {
    K::template block<kFirst>(a, m0, g, h, pf);
    if constexpr (kSecond > 0) K::template block<kSecond>(a, m0 + kFirst, g, h, pf);
  }
}

}  // namespace
}  // namespace attn::detail
