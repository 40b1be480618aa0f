// src/kernels/gemm/gemm_tiles.h — internal: what attn's few-row kernels share
// (f32_gemm, bf16_gemm, int8_gemm in this folder): the weights in groups of 32
// columns, tiles of up to 12 rows whose 24 sums stay in registers over all
// of K, and the order the tiles run in:
//
// - the rows are cut into tiles of equal height (32 rows: 11, 11, 10), so
//   any M runs at nearly the rate of 12;
// - the tiles are taken 4 at a time (at most 48 rows, which stay in the
//   nearer caches), each chunk passing over all the column groups;
// - while the tiles of one group run, each fetches the next group's
//   weights (the first tile of a call its own, 32 steps ahead) into L1, or
//   the f32 kernel's larger groups into L2 (f32_gemm_avx512.cpp): a model's
//   weights are larger than the last cache, so a
//   decoding step finds them in memory. At 32 rows on weights 4 times the
//   size of the last cache, that took the f32 kernel on one thread of the
//   development machine from 173 to 245 GFLOP/s (K 256 x N 1024).
//
// A kernel is a class with kPerStep (values of K a step) and a static
// member template
//   template <int R> static void tile(const Args& a, std::int64_t m0,
//                                     std::int64_t g, const Elem* pf);
// that computes rows [m0, m0 + R) of column group g and fetches the
// weights at pf + step * s at its step s (the AVX-512 kernels get it from
// gemm_tile_loop.h's TileLoop). The kernels compile their tiles for their
// instruction sets; what is here is plain code that calls them.
//
// A tile's rows are unrolled by these macros, once for every kernel:
// ATTN_GEMM_ROWS_12(STEP) is STEP(0) STEP(1) ... STEP(11) (_6 and _4 the
// first 6 and 4), where STEP(r) is the step for row r, guarded by
// `if constexpr (R > r)`; ATTN_GEMM_ROWS_n(ATTN_GEMM_ZERO_SUMS) declares
// the sums lo0, hi0, lo1, ... from a zero register z. Named sums, not an
// array: GCC kept an array's sums on the stack.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/vec/lane_mask.h"

#define ATTN_GEMM_ROWS_4(STEP) STEP(0) STEP(1) STEP(2) STEP(3)
#define ATTN_GEMM_ROWS_6(STEP) ATTN_GEMM_ROWS_4(STEP) STEP(4) STEP(5)
#define ATTN_GEMM_ROWS_12(STEP) \
  ATTN_GEMM_ROWS_6(STEP) STEP(6) STEP(7) STEP(8) STEP(9) STEP(10) STEP(11)
#define ATTN_GEMM_ZERO_SUMS(r) auto lo##r = z, hi##r = z;

namespace attn::detail::gemm_tiles {

inline constexpr std::int64_t kGroup = 32;  // columns per tile: two registers of 16
inline constexpr int kTileRows = 12;  // rows per tile: 24 sums in registers
inline constexpr std::int64_t kChunkTiles = 4;
// How far ahead of its own weights the first tile of a call fetches, in
// steps; the layouts end with as many steps of zeros, so every address a
// kernel fetches lies inside its layout.
inline constexpr std::int64_t kAhead = 32;

// The 128 bytes at p (a step of a group's weights: two cache lines) asked
// into L1 (fetch_l1) or L2 (fetch_l2).
inline void fetch_l1(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
  _mm_prefetch(static_cast<const char*>(p) + 64, _MM_HINT_T0);
}
inline void fetch_l2(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
  _mm_prefetch(static_cast<const char*>(p) + 64, _MM_HINT_T1);
}

template <class Kernel, class Args, class Elem>
void rows_tile(const Args& a, std::int64_t m0, std::int64_t rows, std::int64_t g, const Elem* pf) {
  switch (rows) {
    case 1: return Kernel::template tile<1>(a, m0, g, pf);
    case 2: return Kernel::template tile<2>(a, m0, g, pf);
    case 3: return Kernel::template tile<3>(a, m0, g, pf);
    case 4: return Kernel::template tile<4>(a, m0, g, pf);
    case 5: return Kernel::template tile<5>(a, m0, g, pf);
    case 6: return Kernel::template tile<6>(a, m0, g, pf);
    case 7: return Kernel::template tile<7>(a, m0, g, pf);
    case 8: return Kernel::template tile<8>(a, m0, g, pf);
    case 9: return Kernel::template tile<9>(a, m0, g, pf);
    case 10: return Kernel::template tile<10>(a, m0, g, pf);
    case 11: return Kernel::template tile<11>(a, m0, g, pf);
    default: return Kernel::template tile<12>(a, m0, g, pf);
  }
}

// All a.M rows of column groups [g0, g1) of a.packed, whose steps hold
// Kernel::kPerStep values of K for each of the group's columns (f32 1, bf16
// 2, int8 4; K rounded up to whole steps).
template <class Kernel, class Args>
void run_tiles(const Args& a, std::int64_t g0, std::int64_t g1) {
  const std::int64_t M = a.M, step = kGroup * Kernel::kPerStep;
  const std::int64_t group = (a.K + Kernel::kPerStep - 1) / Kernel::kPerStep * step;
  const auto* packed = a.packed;
  const std::int64_t tiles = (M + kTileRows - 1) / kTileRows;
  if (tiles == 0) return;
  const std::int64_t base = M / tiles, extra = M % tiles;
  for (std::int64_t t0 = 0; t0 < tiles; t0 += kChunkTiles) {
    const std::int64_t t1 = t0 + kChunkTiles < tiles ? t0 + kChunkTiles : tiles;
    for (std::int64_t g = g0; g < g1; ++g) {
      // The group after this one: the next, or the first again for the next
      // tiles; none after the last.
      const std::int64_t after = g + 1 < g1 ? g + 1 : t1 < tiles ? g0 : g;
      for (std::int64_t t = t0; t < t1; ++t) {
        // Tile t's first row, and the next one's.
        const std::int64_t first = t * base + (t < extra ? t : extra);
        const std::int64_t next = (t + 1) * base + (t + 1 < extra ? t + 1 : extra);
        const auto* pf = g == g0 && t == t0 && t0 == 0 ? packed + g * group + kAhead * step
                                                       : packed + after * group;
        rows_tile<Kernel>(a, first, next - first, g, pf);
      }
    }
  }
}

// A kernel's entry in attn::detail, defined after its target region (for
// the baseline, outside any namespace): its tiles in run_tiles' order.
#define ATTN_GEMM_ENTRY(name, Args, Tiles)                     \
  namespace attn::detail {                                     \
  void name(const Args& a, std::int64_t g0, std::int64_t g1) { \
    gemm_tiles::run_tiles<Tiles>(a, g0, g1);                   \
  }                                                            \
  }

// The f32 and bf16 kernels' way out of the registers: each group's columns'
// masks, then the bias added and the ReLU applied.
struct FloatEpilogue {
  __mmask16 mlo, mhi;
  __m512 blo, bhi;
  bool bias, relu;
};

__attribute__((target("avx512f"), always_inline)) inline FloatEpilogue float_epilogue(
    const float* bias, bool relu, std::int64_t N, std::int64_t n0) {
  FloatEpilogue e;
  e.mlo = first_lanes16(N - n0);
  e.mhi = first_lanes16(N - n0 - 16);
  e.bias = bias != nullptr;
  e.relu = relu;
  e.blo = e.bias ? _mm512_maskz_loadu_ps(e.mlo, bias + n0) : _mm512_setzero_ps();
  e.bhi = e.bias ? _mm512_maskz_loadu_ps(e.mhi, bias + n0 + 16) : _mm512_setzero_ps();
  return e;
}

__attribute__((target("avx512f"), always_inline)) inline __m512 finish(__m512 v, __m512 b,
                                                                       const FloatEpilogue& e) {
  if (e.bias) v = _mm512_add_ps(v, b);
  // max(0, v) gives v where v is a NaN, as the kernels' references do.
  if (e.relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
  return v;
}

// Row y's 32 columns (those that exist) from its two registers of sums.
__attribute__((target("avx512f"), always_inline)) inline void store_row(float* y, __m512 lo,
                                                                        __m512 hi,
                                                                        const FloatEpilogue& e) {
  _mm512_mask_storeu_ps(y, e.mlo, finish(lo, e.blo, e));
  _mm512_mask_storeu_ps(y + 16, e.mhi, finish(hi, e.bhi, e));
}

// The f32 and bf16 tiles' way out (gemm_tile_loop.h): a group's epilogue,
// and row m's two registers of sums into y.
struct FloatOut {
  template <class Args>
  __attribute__((target("avx512f"), always_inline)) static FloatEpilogue epilogue(const Args& a,
                                                                                  std::int64_t n0) {
    return float_epilogue(a.bias, a.relu, a.N, n0);
  }
  template <class Args>
  __attribute__((target("avx512f"), always_inline)) static void store(const Args& a, std::int64_t m,
                                                                      std::int64_t n0, __m512 lo,
                                                                      __m512 hi,
                                                                      const FloatEpilogue& e) {
    store_row(a.y + m * a.N + n0, lo, hi, e);
  }
};

}  // namespace attn::detail::gemm_tiles
