// The int8 product of kernels/gemm/int8_gemm.h on AVX-VNNI: the AVX-512
// VNNI kernel's operands and bits (u = xq + 128 in 8 bits, |Wq| <= 127,
// comp = 128 sum_k Wq; vpdpbusd sums each 4 u8 x s8 products into int32,
// exact) in 256-bit registers, for the CPUs with AVX-VNNI and no AVX-512
// (Intel's cores since Alder Lake). Compiled for AVX2, FMA and AVX-VNNI
// whatever the build targets and called only where the CPU has them.
#include <cpuid.h>
#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm/gemm_tiles.h"
#include "kernels/gemm/int8_gemm.h"
#include "kernels/target.h"

namespace attn::detail {

using gemm_tiles::kGroup;

// AVX-VNNI is CPUID leaf 7, subleaf 1, EAX bit 4 (read directly: clang 14's
// __builtin_cpu_supports does not know it); AVX2's check covers the
// operating system's saving of the 256-bit registers.
bool int8_gemm_avx_vnni_cpu() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!int8_gemm_avx2_cpu() || __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax & (1u << 4)) != 0;
}

}  // namespace attn::detail

ATTN_TARGET_BEGIN("avx2,fma,avxvnni")
#include "kernels/gemm/gemm_halves.h"
#include "kernels/gemm/int8_epilogue_avx2.h"

namespace attn::detail {
namespace {

// No standard-library templates in here: their instances, compiled for
// AVX-VNNI, could be the ones the linker keeps for every caller.

// acc += the u8 x s8 dot products of each 4 bytes of x and w, in place: the
// VEX form of vpdpbusd (the EVEX one is AVX-512's), by hand, as the other
// int8 kernels (GCC 12 moved intrinsics' sums between registers).
__attribute__((target("avx2,fma,avxvnni"), always_inline)) inline void dpbusd(__m256i& acc,
                                                                              __m256i x,
                                                                              __m256i w) {
  asm("%{vex%} vpdpbusd %[w], %[x], %[acc]" : [acc] "+x"(acc) : [x] "x"(x), [w] "x"(w));
}

// One row's step: its 4 bytes broadcast (vbroadcastss: a load alone), two
// vpdpbusd.
#define ATTN_INT8_VNNI_ROW_STEP(r)                                                   \
  if constexpr (S > r) {                                                             \
    const __m256i xr = _mm256_castps_si256(                                          \
        _mm256_broadcast_ss(reinterpret_cast<const float*>(x + (r)*a.ldx + 4 * s))); \
    dpbusd(lo##r, xr, w0);                                                           \
    dpbusd(hi##r, xr, w1);                                                           \
  }
#define ATTN_INT8_VNNI_ROW_STORE(r) \
  if constexpr (S > r) int8_store_row16(a, m0 + (r), n0, lo##r, hi##r, e);

struct Int8TilesAvxVnni {
  static constexpr std::int64_t kPerStep = 4;
  // Rows [m0, m0 + S) (S <= 6) of columns [32 g + 16 h, 32 g + 16 h + 16):
  // 12 int32 sums, the step's 2 registers of weights and a broadcast in the
  // 16 registers, while the 64 bytes at pf + 128 s + 64 h are brought into
  // L1 at each step s (the weights a later tile reads, half a step each).
  template <int S>
  __attribute__((target("avx2,fma,avxvnni"), noinline)) static void block(const Int8GemmArgs& a,
                                                                          std::int64_t m0,
                                                                          std::int64_t g,
                                                                          std::int64_t h,
                                                                          const std::int8_t* pf) {
    static_assert(S >= 1 && S <= 6);
    const std::int64_t k4 = (a.K + 3) / 4;
    const std::int8_t* w = a.packed + g * k4 * kGroup * 4 + 64 * h;
    const std::int8_t* f = pf + 64 * h;
    const std::uint8_t* x = a.x + m0 * a.ldx;
    const __m256i z = _mm256_setzero_si256();
    ATTN_GEMM_ROWS_6(ATTN_GEMM_ZERO_SUMS)
    for (std::int64_t s = 0; s < k4; ++s) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + s * 128));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + s * 128 + 32));
      _mm_prefetch(reinterpret_cast<const char*>(f + s * 128), _MM_HINT_T0);
      ATTN_GEMM_ROWS_6(ATTN_INT8_VNNI_ROW_STEP)
    }
    const std::int64_t n0 = g * kGroup + 16 * h;
    const Epilogue8 e = int8_epilogue8(a, n0);
    ATTN_GEMM_ROWS_6(ATTN_INT8_VNNI_ROW_STORE)
  }

  // The tile of gemm_tiles (R <= 12 rows, group g): gemm_halves.h.
  template <int R>
  __attribute__((target("avx2,fma,avxvnni"), noinline)) static void tile(const Int8GemmArgs& a,
                                                                         std::int64_t m0,
                                                                         std::int64_t g,
                                                                         const std::int8_t* pf) {
    tile_in_halves<Int8TilesAvxVnni, R>(a, m0, g, pf);
  }
};

}  // namespace
}  // namespace attn::detail

ATTN_TARGET_END

// The tiles in gemm_tiles' order (kernels/gemm/gemm_tiles.h).
ATTN_GEMM_ENTRY(int8_gemm_avx_vnni, Int8GemmArgs, Int8TilesAvxVnni)
