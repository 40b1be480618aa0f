// The AVX-512 tiles of kernels/gemm/f32_gemm.h (gemm_tile_loop.h's loop),
// compiled for AVX-512 F whatever the build targets and called only where
// the CPU has it.
#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm/f32_gemm.h"
#include "kernels/gemm/gemm_tiles.h"
#include "kernels/target.h"

ATTN_TARGET_BEGIN_AVX512("avx512f")
#include "kernels/gemm/gemm_tile_loop.h"

namespace attn::detail {

using gemm_tiles::kAhead;
using gemm_tiles::kGroup;

namespace {

// No standard-library templates in here: their instances, compiled for
// AVX-512, could be the ones the linker keeps for every caller.

struct F32Tiles512 : gemm_tiles::FloatOut, TileLoop<F32Tiles512> {
  using Weight = __m512;
  static constexpr std::int64_t kPerStep = 1;
  // How many steps ahead a tile fetches its own weights into L1 (2 KB):
  // they come from L2 or beyond, and the hardware's prefetch alone left
  // the loop waiting on them (docs/design/gemm.md, "f32: attn's own kernel").
  static constexpr std::int64_t kOwnAhead = 16;
  static_assert(kAhead >= kOwnAhead);  // the layout's closing zeros cover the last group's

  static __m512 zero() { return _mm512_setzero_ps(); }
  // Its float broadcast, two FMAs.
  static void row(const float* x, std::int64_t k, Weight w0, Weight w1, __m512& lo, __m512& hi) {
    const __m512 v = _mm512_set1_ps(x[k]);
    lo = _mm512_fmadd_ps(v, w0, lo);
    hi = _mm512_fmadd_ps(v, w1, hi);
  }
  // The 128 bytes at pf (the weights a later tile reads) into the L2 cache,
  // and the tile's own weights kOwnAhead steps on into L1. The next group
  // not into L1: at K 256 a group is 32 KB, and the next one fetched beside
  // it into the 48 KB L1 evicted the lines the chunk's other tiles were
  // about to read. The own steps fetched past the group's end lie in the
  // next group or in the layout's closing steps of zeros.
  static void weights(const float* w, const float* pf, Weight& w0, Weight& w1) {
    w0 = _mm512_loadu_ps(w);
    w1 = _mm512_loadu_ps(w + 16);
    gemm_tiles::fetch_l2(pf);
    gemm_tiles::fetch_l1(w + kOwnAhead * kGroup);
  }
};

}  // namespace
}  // namespace attn::detail

ATTN_TARGET_END_AVX512

// The tiles in gemm_tiles' order (kernels/gemm/gemm_tiles.h).
ATTN_GEMM_ENTRY(f32_gemm_avx512, F32GemmArgs, F32Tiles512)
