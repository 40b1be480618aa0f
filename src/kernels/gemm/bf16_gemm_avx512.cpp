// The bf16 tiles of kernels/gemm/bf16_gemm.h on AVX-512 BF16
// (gemm_tile_loop.h's loop), compiled for that whatever the build targets
// and called only where the CPU has it.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/gemm/bf16_gemm.h"
#include "kernels/gemm/gemm_tiles.h"
#include "kernels/target.h"

ATTN_TARGET_BEGIN_AVX512("avx512f,avx512bw,avx512vl,avx512bf16")
#include "kernels/gemm/gemm_tile_loop.h"

namespace attn::detail {

using gemm_tiles::kGroup;

namespace {

// No standard-library templates in here: their instances, compiled for
// AVX-512, could be the ones the linker keeps for every caller.

struct Bf16Tiles : gemm_tiles::FloatOut, TileLoop<Bf16Tiles> {
  using Weight = __m512bh;
  static constexpr std::int64_t kPerStep = 2;

  static __m512 zero() { return _mm512_setzero_ps(); }
  // Its two bf16 values broadcast, two VDPBF16PS.
  static void row(const std::uint16_t* x, std::int64_t s, Weight w0, Weight w1, __m512& lo,
                  __m512& hi) {
    const __m512bh v = (__m512bh)step_bytes(x + 2 * s);
    lo = _mm512_dpbf16_ps(lo, v, w0);
    hi = _mm512_dpbf16_ps(hi, v, w1);
  }
  // The 128 bytes at pf (the weights a later tile reads) into the nearest
  // cache.
  static void weights(const std::uint16_t* w, const std::uint16_t* pf, Weight& w0, Weight& w1) {
    w0 = (__m512bh)_mm512_loadu_si512(w);
    w1 = (__m512bh)_mm512_loadu_si512(w + 32);
    gemm_tiles::fetch_l1(pf);
  }
};

}  // namespace
}  // namespace attn::detail

ATTN_TARGET_END_AVX512

// The tiles in gemm_tiles' order (kernels/gemm/gemm_tiles.h).
ATTN_GEMM_ENTRY(bf16_gemm, Bf16GemmArgs, Bf16Tiles)
