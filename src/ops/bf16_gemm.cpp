// The bf16 product of ops/bf16_gemm.h: its layout and the AVX-512 BF16
// kernel, compiled for that whatever the build targets and called only where
// the CPU has it. Its test (tests/ops/bf16_gemm_test.cpp) holds it to the
// product in double of the same bf16 values.
#include "ops/bf16_gemm.h"

#include <immintrin.h>

#include <cstring>

#include "attn/ops/precision.h"
#include "ops/f32_gemm.h"

namespace attn::detail {

namespace {
constexpr std::int64_t kGroup = 32;  // columns per tile: two registers of 16 sums
constexpr int kTileRows = 12;  // rows per tile: 24 sums in registers
// Tiles whose rows stay in the nearer caches while every column group passes.
constexpr std::int64_t kChunkTiles = 4;
// How far ahead of its own weights the first tile of a call fetches, in
// steps; the layout ends with as many steps of zeros.
constexpr std::int64_t kAhead = 32;
}  // namespace

bool bf16_gemm_supported() {
  // f32_gemm_supported() reads ATTN_ISA.
  static const bool supported = bf16_supported() && f32_gemm_supported();
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
// GCC 12 warns inside its own AVX-512 intrinsics (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

// No standard-library templates in here: their instances, compiled for
// AVX-512, could be the ones the linker keeps for every caller.

__mmask16 first_lanes(std::int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u);
}

struct Epilogue {
  __mmask16 mlo, mhi;
  __m512 blo, bhi;
  bool bias, relu;
};

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), always_inline)) inline __m512 finish(
    __m512 v, __m512 b, const Epilogue& e) {
  if (e.bias) v = _mm512_add_ps(v, b);
  // max(0, v) gives v where v is a NaN.
  if (e.relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
  return v;
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), always_inline)) inline void
store_row(float* y, __m512 lo, __m512 hi, const Epilogue& e) {
  _mm512_mask_storeu_ps(y, e.mlo, finish(lo, e.blo, e));
  _mm512_mask_storeu_ps(y + 16, e.mhi, finish(hi, e.bhi, e));
}

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
  if constexpr (R > r) store_row(a.y + (m0 + r) * a.N + n0, lo##r, hi##r, e);

// y for rows [m0, m0 + R) and group g: the sums over all of K in registers,
// while the 128 bytes at pf + 64 s are brought into the nearest cache at
// each step s (the weights a later tile reads).
template <int R>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), noinline)) void tile(
    const Bf16GemmArgs& a, std::int64_t m0, std::int64_t g, const std::uint16_t* pf) {
  static_assert(R >= 1 && R <= kTileRows);
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
  Epilogue e;
  e.mlo = first_lanes(a.N - n0);
  e.mhi = first_lanes(a.N - n0 - 16);
  e.bias = a.bias != nullptr;
  e.relu = a.relu;
  e.blo = e.bias ? _mm512_maskz_loadu_ps(e.mlo, a.bias + n0) : z;
  e.bhi = e.bias ? _mm512_maskz_loadu_ps(e.mhi, a.bias + n0 + 16) : z;
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
#undef ATTN_BF16_ROW_STEP
#undef ATTN_BF16_ROW_STORE

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void rows_tile(
    const Bf16GemmArgs& a, std::int64_t m0, std::int64_t rows, std::int64_t g,
    const std::uint16_t* pf) {
  switch (rows) {
    case 1: return tile<1>(a, m0, g, pf);
    case 2: return tile<2>(a, m0, g, pf);
    case 3: return tile<3>(a, m0, g, pf);
    case 4: return tile<4>(a, m0, g, pf);
    case 5: return tile<5>(a, m0, g, pf);
    case 6: return tile<6>(a, m0, g, pf);
    case 7: return tile<7>(a, m0, g, pf);
    case 8: return tile<8>(a, m0, g, pf);
    case 9: return tile<9>(a, m0, g, pf);
    case 10: return tile<10>(a, m0, g, pf);
    case 11: return tile<11>(a, m0, g, pf);
    default: return tile<12>(a, m0, g, pf);
  }
}

}  // namespace

// The rows in tiles of equal size, the weights fetched a group ahead, as in
// ops/f32_gemm.cpp.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void bf16_gemm(
    const Bf16GemmArgs& a, std::int64_t g0, std::int64_t g1) {
  const std::int64_t tiles = (a.M + kTileRows - 1) / kTileRows;
  if (tiles == 0) return;
  const std::int64_t base = a.M / tiles, extra = a.M % tiles;
  const std::int64_t step = (a.K + 1) / 2 * kGroup * 2;  // bf16 values per group
  for (std::int64_t t0 = 0; t0 < tiles; t0 += kChunkTiles) {
    const std::int64_t t1 = t0 + kChunkTiles < tiles ? t0 + kChunkTiles : tiles;
    for (std::int64_t g = g0; g < g1; ++g) {
      const std::int64_t after = g + 1 < g1 ? g + 1 : t1 < tiles ? g0 : g;
      for (std::int64_t t = t0; t < t1; ++t) {
        const std::int64_t first = t * base + (t < extra ? t : extra);
        const std::int64_t next = (t + 1) * base + (t + 1 < extra ? t + 1 : extra);
        const std::uint16_t* pf = g == g0 && t == t0 && t0 == 0
                                      ? a.packed + g * step + kAhead * kGroup * 2
                                      : a.packed + after * step;
        rows_tile(a, first, next - first, g, pf);
      }
    }
  }
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

}  // namespace attn::detail
