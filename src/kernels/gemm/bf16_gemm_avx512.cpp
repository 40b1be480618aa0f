// The bf16 tiles of kernels/gemm/bf16_gemm.h on AVX-512 BF16, compiled for
// that whatever the build targets and called only where the CPU has it.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/gemm/bf16_gemm.h"
#include "kernels/gemm/gemm_tiles.h"
#include "kernels/target.h"

namespace attn::detail {

using gemm_tiles::kGroup;

ATTN_TARGET_BEGIN_AVX512("avx512f,avx512bw,avx512vl,avx512bf16")

namespace {

// No standard-library templates in here: their instances, compiled for
// AVX-512, could be the ones the linker keeps for every caller.

// One row's step: its two bf16 values broadcast, two VDPBF16PS. Named sums,
// not an array (as in kernels/gemm/int8_gemm.cpp).
#define ATTN_BF16_ROW_STEP(r)                             \
  if constexpr (R > r) {                                  \
    std::int32_t two;                                     \
    std::memcpy(&two, x + (r)*a.ldx + 2 * s, sizeof two); \
    const __m512bh v = (__m512bh)_mm512_set1_epi32(two);  \
    lo##r = _mm512_dpbf16_ps(lo##r, v, w0);               \
    hi##r = _mm512_dpbf16_ps(hi##r, v, w1);               \
  }
struct Bf16Tiles {
  static constexpr std::int64_t kPerStep = 2;
  // y for rows [m0, m0 + R) and group g: the sums over all of K in
  // registers, while the 128 bytes at pf + 64 s are brought into the
  // nearest cache at each step s (the weights a later tile reads).
  template <int R>
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), noinline)) static void tile(
      const Bf16GemmArgs& a, std::int64_t m0, std::int64_t g, const std::uint16_t* pf) {
    static_assert(R >= 1 && R <= gemm_tiles::kTileRows);
    const std::int64_t k2 = (a.K + 1) / 2;
    const std::uint16_t* w = a.packed + g * k2 * kGroup * 2;
    const std::uint16_t* x = a.x + m0 * a.ldx;
    const __m512 z = _mm512_setzero_ps();
    ATTN_GEMM_ROWS_12(ATTN_GEMM_ZERO_SUMS)
    for (std::int64_t s = 0; s < k2; ++s) {
      const __m512bh w0 = (__m512bh)_mm512_loadu_si512(w + s * 64),
                     w1 = (__m512bh)_mm512_loadu_si512(w + s * 64 + 32);
      gemm_tiles::fetch_l1(pf + s * 64);
      ATTN_GEMM_ROWS_12(ATTN_BF16_ROW_STEP)
    }
    ATTN_GEMM_FLOAT_STORE_ROWS
  }
};

}  // namespace

ATTN_TARGET_END_AVX512

// The tiles in gemm_tiles' order (kernels/gemm/gemm_tiles.h).
ATTN_GEMM_ENTRY(bf16_gemm, Bf16GemmArgs, Bf16Tiles)

}  // namespace attn::detail
