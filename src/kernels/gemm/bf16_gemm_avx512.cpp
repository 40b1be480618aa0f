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
#define ATTN_BF16_ROW_STORE(r) \
  if constexpr (R > r) gemm_tiles::store_row(a.y + (m0 + r) * a.N + n0, lo##r, hi##r, e);

struct Bf16Tiles {
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
      _mm_prefetch(reinterpret_cast<const char*>(pf + s * 64), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(pf + s * 64 + 32), _MM_HINT_T0);
      ATTN_GEMM_ROWS_12(ATTN_BF16_ROW_STEP)
    }
    const std::int64_t n0 = g * kGroup;
    const gemm_tiles::FloatEpilogue e = gemm_tiles::float_epilogue(a.bias, a.relu, a.N, n0);
    ATTN_GEMM_ROWS_12(ATTN_BF16_ROW_STORE)
  }
};
#undef ATTN_BF16_ROW_STEP
#undef ATTN_BF16_ROW_STORE

}  // namespace

ATTN_TARGET_END_AVX512

// The tiles in gemm_tiles' order (kernels/gemm/gemm_tiles.h).
void bf16_gemm(const Bf16GemmArgs& a, std::int64_t g0, std::int64_t g1) {
  gemm_tiles::run_tiles<Bf16Tiles>(a, a.M, a.packed, (a.K + 1) / 2 * kGroup * 2, kGroup * 2, g0,
                                   g1);
}

}  // namespace attn::detail
