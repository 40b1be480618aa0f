// The int8 tiles of kernels/gemm/int8_gemm.h on AVX-512 VNNI, compiled for
// that whatever the build targets and called only where the CPU has it.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/gemm/gemm_tiles.h"
#include "kernels/gemm/int8_gemm.h"
#include "kernels/target.h"

namespace attn::detail {

using gemm_tiles::kGroup;

ATTN_TARGET_BEGIN_AVX512("avx512f,avx512bw,avx512vl,avx512vnni")

namespace {

// No standard-library templates in here: their instances, compiled for
// AVX-512, could be the ones the linker keeps for every caller.

// What turns a group's sums into floats: its columns' masks, comp, sw and bias.
struct Epilogue {
  __mmask16 mlo, mhi;
  __m512i clo, chi;
  __m512 slo, shi, blo, bhi;
};

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) inline void
store_row(float* y, float sx, __m512i lo, __m512i hi, const Epilogue& e) {
  const __m512 vsx = _mm512_set1_ps(sx);
  _mm512_mask_storeu_ps(y, e.mlo,
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(lo, e.clo)),
                                        _mm512_mul_ps(vsx, e.slo), e.blo));
  _mm512_mask_storeu_ps(y + 16, e.mhi,
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(hi, e.chi)),
                                        _mm512_mul_ps(vsx, e.shi), e.bhi));
}

// acc += the u8 x s8 dot products of each 4 bytes of x and w, in place.
// The instruction by hand: with the intrinsic, GCC 12 moved every sum to
// another register (or to the stack, past 8 rows) at each step.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) inline void dpbusd(
    __m512i& acc, __m512i x, __m512i w) {
  asm("vpdpbusd %[w], %[x], %[acc]" : [acc] "+v"(acc) : [x] "v"(x), [w] "v"(w));
}

// One row's step: its 4 bytes broadcast, two vpdpbusd. Named sums, not an
// array: GCC kept an array's sums on the stack, loading and storing them at
// every step.
#define ATTN_INT8_ROW_STEP(r)                               \
  if constexpr (R > r) {                                    \
    std::int32_t four;                                      \
    std::memcpy(&four, u + (r)*a.ldu + 4 * s, sizeof four); \
    const __m512i x = _mm512_set1_epi32(four);              \
    dpbusd(lo##r, x, w0);                                   \
    dpbusd(hi##r, x, w1);                                   \
  }
#define ATTN_INT8_ROW_STORE(r) \
  if constexpr (R > r) store_row(a.y + (m0 + r) * a.N + n0, a.sx[m0 + r], lo##r, hi##r, e);

// y for rows [m0, m0 + R) and group g: the sums over all of K in registers,
// then acc - comp, times sx * sw, plus the bias, as dequantize_row does;
// meanwhile the 128 bytes at pf + 128 s are brought into the nearest cache
// at each step s (the weights a later tile reads).
struct Int8Tiles {
  static constexpr std::int64_t kPerStep = 4;
  template <int R>
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), noinline)) static void tile(
      const Int8GemmArgs& a, std::int64_t m0, std::int64_t g, const std::int8_t* pf);
};

template <int R>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), noinline)) void Int8Tiles::tile(
    const Int8GemmArgs& a, std::int64_t m0, std::int64_t g, const std::int8_t* pf) {
  static_assert(R >= 1 && R <= gemm_tiles::kTileRows);
  const std::int64_t k4 = (a.K + 3) / 4;
  const std::int8_t* w = a.packed + g * k4 * kGroup * 4;
  const std::uint8_t* u = a.u + m0 * a.ldu;
  const __m512i z = _mm512_setzero_si512();
  ATTN_GEMM_ROWS_12(ATTN_GEMM_ZERO_SUMS)
  for (std::int64_t s = 0; s < k4; ++s) {
    const __m512i w0 = _mm512_loadu_si512(w + s * 128), w1 = _mm512_loadu_si512(w + s * 128 + 64);
    gemm_tiles::fetch_l1(pf + s * 128);
    ATTN_GEMM_ROWS_12(ATTN_INT8_ROW_STEP)
  }
  const std::int64_t n0 = g * kGroup;
  Epilogue e;
  e.mlo = gemm_tiles::first_lanes(a.N - n0);
  e.mhi = gemm_tiles::first_lanes(a.N - n0 - 16);
  e.clo = _mm512_maskz_loadu_epi32(e.mlo, a.comp + n0);
  e.chi = _mm512_maskz_loadu_epi32(e.mhi, a.comp + n0 + 16);
  e.slo = _mm512_maskz_loadu_ps(e.mlo, a.sw + n0);
  e.shi = _mm512_maskz_loadu_ps(e.mhi, a.sw + n0 + 16);
  e.blo = a.bias ? _mm512_maskz_loadu_ps(e.mlo, a.bias + n0) : _mm512_setzero_ps();
  e.bhi = a.bias ? _mm512_maskz_loadu_ps(e.mhi, a.bias + n0 + 16) : _mm512_setzero_ps();
  ATTN_GEMM_ROWS_12(ATTN_INT8_ROW_STORE)
}

}  // namespace

ATTN_TARGET_END_AVX512

// The tiles in gemm_tiles' order (kernels/gemm/gemm_tiles.h). The next group's
// weights fetched ahead made int8 greedy translation of the 2,000 test
// sentences 0.420 -> 0.393 s (medians of 4 alternating pairs), beam 4
// unchanged.
ATTN_GEMM_ENTRY(int8_gemm, Int8GemmArgs, Int8Tiles)

}  // namespace attn::detail
