// The AVX2 tiles of kernels/gemm/f32_gemm.h, compiled for AVX2 and FMA
// whatever the build targets and called only where the CPU has them.
#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm/f32_gemm.h"
#include "kernels/gemm/gemm_tiles.h"
#include "kernels/target.h"

ATTN_TARGET_BEGIN("avx2,fma")
#include "kernels/gemm/gemm_halves.h"

namespace attn::detail {

using gemm_tiles::kGroup;

namespace {

// Lanes [0, n) of 8 (the columns that exist), as a maskload/maskstore mask.
__attribute__((target("avx2,fma"), always_inline)) inline __m256i first_lanes8(std::int64_t n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int c = n >= 8 ? 8 : n <= 0 ? 0 : static_cast<int>(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), lane);
}

// One 8-column register of a row on its way out: the bias, the ReLU as the
// AVX-512 tiles do it (max(0, v) gives v where v is a NaN), then the columns
// that exist.
__attribute__((target("avx2,fma"), always_inline)) inline void store8(float* y, __m256 v, __m256 b,
                                                                      __m256i mask, bool full,
                                                                      const F32GemmArgs& a) {
  if (a.bias) v = _mm256_add_ps(v, b);
  if (a.relu) v = _mm256_max_ps(_mm256_setzero_ps(), v);
  if (full)
    _mm256_storeu_ps(y, v);
  else
    _mm256_maskstore_ps(y, mask, v);
}

#define ATTN_F32_ROW_STEP8(r)                                \
  if constexpr (S > r) {                                     \
    const __m256 v = _mm256_broadcast_ss(x + (r)*a.ldx + k); \
    lo##r = _mm256_fmadd_ps(v, w0, lo##r);                   \
    hi##r = _mm256_fmadd_ps(v, w1, hi##r);                   \
  }
#define ATTN_F32_ROW_STORE8(r)                                      \
  if constexpr (S > r) {                                            \
    store8(y + (r)*a.N, lo##r, blo, mlo, full, a);                  \
    if (hi_cols) store8(y + (r)*a.N + 8, hi##r, bhi, mhi, full, a); \
  }

struct F32Tiles256 {
  static constexpr std::int64_t kPerStep = 1;
  // Rows [m0, m0 + S) (S <= 6) of columns [32 g + 16 h, 32 g + 16 h + 16):
  // 12 sums, 2 registers of weights and a broadcast in the 16 registers,
  // while the 64 bytes at pf + 32 k + 16 h are brought into the L2 cache at
  // each step k (as the AVX-512 tiles do, half a step each).
  template <int S>
  __attribute__((target("avx2,fma"), noinline)) static void block(const F32GemmArgs& a,
                                                                  std::int64_t m0, std::int64_t g,
                                                                  std::int64_t h, const float* pf) {
    static_assert(S >= 1 && S <= 6);
    const float* w = a.packed + g * a.K * kGroup + 16 * h;
    const float* x = a.x + m0 * a.ldx;
    const float* f = pf + 16 * h;
    const __m256 z = _mm256_setzero_ps();
    ATTN_GEMM_ROWS_6(ATTN_GEMM_ZERO_SUMS)
    for (std::int64_t k = 0; k < a.K; ++k) {
      const __m256 w0 = _mm256_loadu_ps(w + k * kGroup), w1 = _mm256_loadu_ps(w + k * kGroup + 8);
      _mm_prefetch(reinterpret_cast<const char*>(f + k * kGroup), _MM_HINT_T1);
      ATTN_GEMM_ROWS_6(ATTN_F32_ROW_STEP8)
    }
    const std::int64_t n0 = g * kGroup + 16 * h, cols = a.N - n0;
    const bool full = cols >= 16, hi_cols = cols > 8;
    const __m256i mlo = first_lanes8(cols), mhi = first_lanes8(cols - 8);
    const __m256 blo = a.bias ? _mm256_maskload_ps(a.bias + n0, mlo) : z;
    const __m256 bhi = a.bias ? _mm256_maskload_ps(a.bias + n0 + 8, mhi) : z;
    float* y = a.y + m0 * a.N + n0;
    ATTN_GEMM_ROWS_6(ATTN_F32_ROW_STORE8)
  }

  // The tile of gemm_tiles (R <= 12 rows, group g): gemm_halves.h.
  template <int R>
  __attribute__((target("avx2,fma"), noinline)) static void tile(const F32GemmArgs& a,
                                                                 std::int64_t m0, std::int64_t g,
                                                                 const float* pf) {
    tile_in_halves<F32Tiles256, R>(a, m0, g, pf);
  }
};

}  // namespace
}  // namespace attn::detail

ATTN_TARGET_END

// The tiles in gemm_tiles' order (kernels/gemm/gemm_tiles.h).
ATTN_GEMM_ENTRY(f32_gemm_avx2, F32GemmArgs, F32Tiles256)
