// The AVX-512 tiles of kernels/gemm/f32_gemm.h, compiled for AVX-512 F
// whatever the build targets and called only where the CPU has it.
#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm/f32_gemm.h"
#include "kernels/gemm/gemm_tiles.h"
#include "kernels/target.h"

namespace attn::detail {

using gemm_tiles::kAhead;
using gemm_tiles::kGroup;

ATTN_TARGET_BEGIN_AVX512("avx512f")

namespace {

// No standard-library templates in here: their instances, compiled for
// AVX-512, could be the ones the linker keeps for every caller.

// One row's step: its float broadcast, two FMAs. Named sums, not an array
// (as in kernels/gemm/int8_gemm.cpp: GCC kept an array's sums on the stack).
#define ATTN_F32_ROW_STEP(r)                           \
  if constexpr (R > r) {                               \
    const __m512 v = _mm512_set1_ps(x[(r)*a.ldx + k]); \
    lo##r = _mm512_fmadd_ps(v, w0, lo##r);             \
    hi##r = _mm512_fmadd_ps(v, w1, hi##r);             \
  }
struct F32Tiles512 {
  static constexpr std::int64_t kPerStep = 1;
  // How many steps ahead a tile fetches its own weights into L1 (2 KB):
  // they come from L2 or beyond, and the hardware's prefetch alone left
  // the loop waiting on them (docs/design/gemm.md, "f32: attn's own kernel").
  static constexpr std::int64_t kOwnAhead = 16;
  static_assert(kAhead >= kOwnAhead);  // the layout's closing zeros cover the last group's

  // y for rows [m0, m0 + R) and group g: the sums over all of K in
  // registers, while the 128 bytes at pf + 32 k are brought into the L2
  // cache at each step k (the weights a later tile reads), and its own
  // weights kOwnAhead steps on into L1. The next group not into L1: at
  // K 256 a group is 32 KB, and the next one fetched beside it into the
  // 48 KB L1 evicted the lines the chunk's other tiles were about to read.
  // The own steps fetched past the group's end lie in the next group or in
  // the layout's closing steps of zeros (kAhead >= kOwnAhead).
  template <int R>
  __attribute__((target("avx512f"), noinline)) static void tile(const F32GemmArgs& a,
                                                                std::int64_t m0, std::int64_t g,
                                                                const float* pf) {
    static_assert(R >= 1 && R <= gemm_tiles::kTileRows);
    const float* w = a.packed + g * a.K * kGroup;
    const float* x = a.x + m0 * a.ldx;
    const __m512 z = _mm512_setzero_ps();
    ATTN_GEMM_ROWS_12(ATTN_GEMM_ZERO_SUMS)
    for (std::int64_t k = 0; k < a.K; ++k) {
      const __m512 w0 = _mm512_loadu_ps(w + k * kGroup), w1 = _mm512_loadu_ps(w + k * kGroup + 16);
      gemm_tiles::fetch_l2(pf + k * kGroup);
      gemm_tiles::fetch_l1(w + (k + kOwnAhead) * kGroup);
      ATTN_GEMM_ROWS_12(ATTN_F32_ROW_STEP)
    }
    ATTN_GEMM_FLOAT_STORE_ROWS
  }
};

}  // namespace

ATTN_TARGET_END_AVX512

// The tiles in gemm_tiles' order (kernels/gemm/gemm_tiles.h).
ATTN_GEMM_ENTRY(f32_gemm_avx512, F32GemmArgs, F32Tiles512)

}  // namespace attn::detail
