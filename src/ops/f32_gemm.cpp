// The f32 product of ops/f32_gemm.h: its layout, its plain reference, and
// the AVX-512 kernel, compiled for that whatever the build targets and called
// only where the CPU has it.
#include "ops/f32_gemm.h"

#include <immintrin.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace attn::detail {

namespace {
constexpr std::int64_t kGroup = 32;  // columns per tile: two registers of 16 floats
constexpr int kTileRows = 12;  // rows per tile: 24 sums in registers
// Tiles whose rows stay in the nearer caches while every column group passes.
constexpr std::int64_t kChunkTiles = 4;
// How far ahead of its own weights the first tile of a call fetches, in
// steps; the layout ends with as many steps of zeros, so every address the
// kernel fetches lies inside it.
constexpr std::int64_t kAhead = 32;
}  // namespace

bool f32_gemm_supported() {
  static const bool supported = [] {
    // ATTN_ISA=avx2 or portable stands for a CPU without AVX-512, as for the
    // attention kernels (attn/ops/attention.h): oneDNN's path then.
    const char* isa = std::getenv("ATTN_ISA");
    if (isa && *isa && std::strcmp(isa, "avx512") != 0) return false;
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return supported;
}

std::int64_t f32_gemm_packed_size(std::int64_t N, std::int64_t K) {
  return ((N + kGroup - 1) / kGroup * K + kAhead) * kGroup;
}

void pack_f32_gemm(const float* w, std::int64_t N, std::int64_t K, std::int64_t ldn,
                   std::int64_t ldk, float* packed) {
  const std::int64_t groups = (N + kGroup - 1) / kGroup;
  for (std::int64_t g = 0; g < groups; ++g)
    for (std::int64_t k = 0; k < K; ++k) {
      float* step = packed + (g * K + k) * kGroup;
      for (std::int64_t c = 0; c < kGroup; ++c) {
        const std::int64_t n = g * kGroup + c;
        step[c] = n < N ? w[n * ldn + k * ldk] : 0.0f;
      }
    }
  for (std::int64_t i = groups * K * kGroup; i < f32_gemm_packed_size(N, K); ++i) packed[i] = 0.0f;
}

void f32_gemm_reference(const F32GemmArgs& a, const float* w) {
  for (std::int64_t m = 0; m < a.M; ++m)
    for (std::int64_t n = 0; n < a.N; ++n) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < a.K; ++k)
        acc = std::fma(a.x[m * a.ldx + k], w[n * a.K + k], acc);
      if (a.bias) acc += a.bias[n];
      // A NaN stays one (as max(0, y) in the kernel).
      if (a.relu && acc < 0.0f) acc = 0.0f;
      a.y[m * a.N + n] = acc;
    }
}

#pragma GCC push_options
#pragma GCC target("avx512f")
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

// What a group's sums get on their way out: its columns' masks and bias.
struct Epilogue {
  __mmask16 mlo, mhi;
  __m512 blo, bhi;
  bool bias, relu;
};

__attribute__((target("avx512f"), always_inline)) inline __m512 finish(__m512 v, __m512 b,
                                                                       const Epilogue& e) {
  if (e.bias) v = _mm512_add_ps(v, b);
  // max(0, v) gives v where v is a NaN, as the reference does.
  if (e.relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
  return v;
}

__attribute__((target("avx512f"), always_inline)) inline void store_row(float* y, __m512 lo,
                                                                        __m512 hi,
                                                                        const Epilogue& e) {
  _mm512_mask_storeu_ps(y, e.mlo, finish(lo, e.blo, e));
  _mm512_mask_storeu_ps(y + 16, e.mhi, finish(hi, e.bhi, e));
}

// One row's step: its float broadcast, two FMAs. Named sums, not an array
// (as in ops/int8_gemm.cpp: GCC kept an array's sums on the stack).
#define ATTN_F32_ROW_STEP(r)                           \
  if constexpr (R > r) {                               \
    const __m512 v = _mm512_set1_ps(x[(r)*a.ldx + k]); \
    lo##r = _mm512_fmadd_ps(v, w0, lo##r);             \
    hi##r = _mm512_fmadd_ps(v, w1, hi##r);             \
  }
#define ATTN_F32_ROW_STORE(r) \
  if constexpr (R > r) store_row(a.y + (m0 + r) * a.N + n0, lo##r, hi##r, e);

// y for rows [m0, m0 + R) and group g: the sums over all of K in registers,
// while the 128 bytes at pf + 32 k are brought into the nearest cache at
// each step k (the weights a later tile reads).
template <int R>
__attribute__((target("avx512f"), noinline)) void tile(const F32GemmArgs& a, std::int64_t m0,
                                                       std::int64_t g, const float* pf) {
  static_assert(R >= 1 && R <= kTileRows);
  const float* w = a.packed + g * a.K * kGroup;
  const float* x = a.x + m0 * a.ldx;
  const __m512 z = _mm512_setzero_ps();
  __m512 lo0 = z, lo1 = z, lo2 = z, lo3 = z, lo4 = z, lo5 = z, lo6 = z, lo7 = z, lo8 = z, lo9 = z,
         lo10 = z, lo11 = z;
  __m512 hi0 = z, hi1 = z, hi2 = z, hi3 = z, hi4 = z, hi5 = z, hi6 = z, hi7 = z, hi8 = z, hi9 = z,
         hi10 = z, hi11 = z;
  for (std::int64_t k = 0; k < a.K; ++k) {
    const __m512 w0 = _mm512_loadu_ps(w + k * kGroup), w1 = _mm512_loadu_ps(w + k * kGroup + 16);
    _mm_prefetch(reinterpret_cast<const char*>(pf + k * kGroup), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(pf + k * kGroup + 16), _MM_HINT_T0);
    ATTN_F32_ROW_STEP(0)
    ATTN_F32_ROW_STEP(1)
    ATTN_F32_ROW_STEP(2)
    ATTN_F32_ROW_STEP(3)
    ATTN_F32_ROW_STEP(4)
    ATTN_F32_ROW_STEP(5)
    ATTN_F32_ROW_STEP(6)
    ATTN_F32_ROW_STEP(7)
    ATTN_F32_ROW_STEP(8)
    ATTN_F32_ROW_STEP(9)
    ATTN_F32_ROW_STEP(10)
    ATTN_F32_ROW_STEP(11)
  }
  const std::int64_t n0 = g * kGroup;
  Epilogue e;
  e.mlo = first_lanes(a.N - n0);
  e.mhi = first_lanes(a.N - n0 - 16);
  e.bias = a.bias != nullptr;
  e.relu = a.relu;
  e.blo = e.bias ? _mm512_maskz_loadu_ps(e.mlo, a.bias + n0) : z;
  e.bhi = e.bias ? _mm512_maskz_loadu_ps(e.mhi, a.bias + n0 + 16) : z;
  ATTN_F32_ROW_STORE(0)
  ATTN_F32_ROW_STORE(1)
  ATTN_F32_ROW_STORE(2)
  ATTN_F32_ROW_STORE(3)
  ATTN_F32_ROW_STORE(4)
  ATTN_F32_ROW_STORE(5)
  ATTN_F32_ROW_STORE(6)
  ATTN_F32_ROW_STORE(7)
  ATTN_F32_ROW_STORE(8)
  ATTN_F32_ROW_STORE(9)
  ATTN_F32_ROW_STORE(10)
  ATTN_F32_ROW_STORE(11)
}
#undef ATTN_F32_ROW_STEP
#undef ATTN_F32_ROW_STORE

__attribute__((target("avx512f"))) void rows_tile(const F32GemmArgs& a, std::int64_t m0,
                                                  std::int64_t rows, std::int64_t g,
                                                  const float* pf) {
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

// The rows in tiles of equal size (32 rows: 11, 11, 10), each group's
// weights read once per tile from the nearer caches. A model's weights are
// larger than the last cache, so a decoding step finds them in memory: while
// the tiles of one group run, they fetch the next group's weights (the
// first tile its own, 32 steps ahead). At 32 rows on weights 4 times the
// size of the last cache, that took one thread of the development machine
// from 173 to 245 GFLOP/s (K 256 x N 1024; 70% to the speed on cached ones).
__attribute__((target("avx512f"))) void f32_gemm(const F32GemmArgs& a, std::int64_t g0,
                                                 std::int64_t g1) {
  const std::int64_t tiles = (a.M + kTileRows - 1) / kTileRows;
  if (tiles == 0) return;
  const std::int64_t base = a.M / tiles, extra = a.M % tiles;
  const std::int64_t step = a.K * kGroup;  // floats per group
  for (std::int64_t t0 = 0; t0 < tiles; t0 += kChunkTiles) {
    const std::int64_t t1 = t0 + kChunkTiles < tiles ? t0 + kChunkTiles : tiles;
    for (std::int64_t g = g0; g < g1; ++g) {
      // The group after this one: the next, or the first again for the next
      // tiles; none after the last.
      const std::int64_t after = g + 1 < g1 ? g + 1 : t1 < tiles ? g0 : g;
      for (std::int64_t t = t0; t < t1; ++t) {
        // Tile t's first row, and the next one's.
        const std::int64_t first = t * base + (t < extra ? t : extra);
        const std::int64_t next = (t + 1) * base + (t + 1 < extra ? t + 1 : extra);
        const float* pf = g == g0 && t == t0 && t0 == 0 ? a.packed + g * step + kAhead * kGroup
                                                        : a.packed + after * step;
        rows_tile(a, first, next - first, g, pf);
      }
    }
  }
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

}  // namespace attn::detail
