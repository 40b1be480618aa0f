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
  using Args = Bf16GemmArgs;
  using Elem = std::uint16_t;
  using Sum = __m512;
  using Weight = __m512bh;
  static constexpr std::int64_t kPerStep = 2;

  static Sum zero() { return _mm512_setzero_ps(); }
  // The 128 bytes at pf (the weights a later tile reads) into the nearest
  // cache.
  static void weights(const std::uint16_t* w, const std::uint16_t* pf, Weight& w0, Weight& w1) {
    w0 = (__m512bh)_mm512_loadu_si512(w);
    w1 = (__m512bh)_mm512_loadu_si512(w + 32);
    gemm_tiles::fetch_l1(pf);
  }
  // Its two bf16 values broadcast, two VDPBF16PS.
  static void row(const std::uint16_t* x, std::int64_t s, Weight w0, Weight w1, Sum& lo, Sum& hi) {
    std::int32_t two;
    std::memcpy(&two, x + 2 * s, sizeof two);
    const __m512bh v = (__m512bh)_mm512_set1_epi32(two);
    lo = _mm512_dpbf16_ps(lo, v, w0);
    hi = _mm512_dpbf16_ps(hi, v, w1);
  }
};

}  // namespace
}  // namespace attn::detail

ATTN_TARGET_END_AVX512

namespace attn::detail {

// The tiles in gemm_tiles' order (kernels/gemm/gemm_tiles.h).
ATTN_GEMM_ENTRY(bf16_gemm, Bf16GemmArgs, Bf16Tiles)

}  // namespace attn::detail
