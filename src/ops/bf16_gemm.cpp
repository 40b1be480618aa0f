// The bf16 product of ops/bf16_gemm.h: its layout and the AVX-512 BF16
// kernel, compiled for that whatever the build targets and called only where
// the CPU has it. Its test (tests/ops/bf16_gemm_test.cpp) holds it to the
// product in double of the same bf16 values.
#include "ops/bf16_gemm.h"

#include <immintrin.h>

#include <cstring>

#include "attn/ops/precision.h"
#include "ops/f32_gemm.h"
#include "ops/gemm_tiles.h"

namespace attn::detail {

using gemm_tiles::kAhead;
using gemm_tiles::kGroup;

bool bf16_gemm_supported() {
  // f32_gemm_isa() reads ATTN_ISA (avx2 or portable: no AVX-512 tiles).
  static const bool supported = bf16_supported() && f32_gemm_isa() == F32GemmIsa::avx512;
  return supported;
}

std::int64_t bf16_gemm_packed_size(std::int64_t N, std::int64_t K) {
  return ((N + kGroup - 1) / kGroup * ((K + 1) / 2) + kAhead) * kGroup * 2;
}

void pack_bf16_gemm(const std::uint16_t* w, std::int64_t N, std::int64_t K, std::int64_t ldn,
                    std::int64_t ldk, std::uint16_t* packed) {
  const std::int64_t k2 = (K + 1) / 2;
  std::memset(packed, 0, static_cast<std::size_t>(bf16_gemm_packed_size(N, K)) * 2);
  for (std::int64_t n = 0; n < N; ++n) {
    const std::int64_t g = n / kGroup, c = n % kGroup;
    for (std::int64_t k = 0; k < K; ++k)
      packed[((g * k2 + k / 2) * kGroup + c) * 2 + k % 2] = w[n * ldn + k * ldk];
  }
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#if defined(__clang__)  // clang ignores the GCC pragma (the fuzz build)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))), \
                             apply_to = function)
#endif
// GCC 12 warns inside its own AVX-512 intrinsics (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

// No standard-library templates in here: their instances, compiled for
// AVX-512, could be the ones the linker keeps for every caller.

// One row's step: its two bf16 values broadcast, two VDPBF16PS. Named sums,
// not an array (as in ops/int8_gemm.cpp).
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
    __m512 lo0 = z, lo1 = z, lo2 = z, lo3 = z, lo4 = z, lo5 = z, lo6 = z, lo7 = z, lo8 = z, lo9 = z,
           lo10 = z, lo11 = z;
    __m512 hi0 = z, hi1 = z, hi2 = z, hi3 = z, hi4 = z, hi5 = z, hi6 = z, hi7 = z, hi8 = z, hi9 = z,
           hi10 = z, hi11 = z;
    for (std::int64_t s = 0; s < k2; ++s) {
      const __m512bh w0 = (__m512bh)_mm512_loadu_si512(w + s * 64),
                     w1 = (__m512bh)_mm512_loadu_si512(w + s * 64 + 32);
      _mm_prefetch(reinterpret_cast<const char*>(pf + s * 64), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(pf + s * 64 + 32), _MM_HINT_T0);
      ATTN_BF16_ROW_STEP(0)
      ATTN_BF16_ROW_STEP(1)
      ATTN_BF16_ROW_STEP(2)
      ATTN_BF16_ROW_STEP(3)
      ATTN_BF16_ROW_STEP(4)
      ATTN_BF16_ROW_STEP(5)
      ATTN_BF16_ROW_STEP(6)
      ATTN_BF16_ROW_STEP(7)
      ATTN_BF16_ROW_STEP(8)
      ATTN_BF16_ROW_STEP(9)
      ATTN_BF16_ROW_STEP(10)
      ATTN_BF16_ROW_STEP(11)
    }
    const std::int64_t n0 = g * kGroup;
    const gemm_tiles::FloatEpilogue e = gemm_tiles::float_epilogue(a.bias, a.relu, a.N, n0);
    ATTN_BF16_ROW_STORE(0)
    ATTN_BF16_ROW_STORE(1)
    ATTN_BF16_ROW_STORE(2)
    ATTN_BF16_ROW_STORE(3)
    ATTN_BF16_ROW_STORE(4)
    ATTN_BF16_ROW_STORE(5)
    ATTN_BF16_ROW_STORE(6)
    ATTN_BF16_ROW_STORE(7)
    ATTN_BF16_ROW_STORE(8)
    ATTN_BF16_ROW_STORE(9)
    ATTN_BF16_ROW_STORE(10)
    ATTN_BF16_ROW_STORE(11)
  }
};
#undef ATTN_BF16_ROW_STEP
#undef ATTN_BF16_ROW_STORE

}  // namespace

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options

// The tiles in gemm_tiles' order (ops/gemm_tiles.h).
void bf16_gemm(const Bf16GemmArgs& a, std::int64_t g0, std::int64_t g1) {
  gemm_tiles::run_tiles<Bf16Tiles>(a, a.M, a.packed, (a.K + 1) / 2 * kGroup * 2, kGroup * 2, g0,
                                   g1);
}

}  // namespace attn::detail
