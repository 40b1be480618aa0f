// The f32 product of ops/f32_gemm.h: its layout, its plain reference, and
// the AVX-512 and AVX2 kernels, each compiled for its instruction set
// whatever the build targets and called only where the CPU has it.
#include "ops/f32_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ops/gemm_tiles.h"

namespace attn::detail {

using gemm_tiles::kAhead;
using gemm_tiles::kGroup;

bool f32_gemm_cpu_has(F32GemmIsa isa) {
  switch (isa) {
    case F32GemmIsa::avx512: return __builtin_cpu_supports("avx512f") != 0;
    case F32GemmIsa::avx2:
      return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
    case F32GemmIsa::none: return true;
  }
  return false;
}

F32GemmIsa f32_gemm_isa() {
  static const F32GemmIsa isa = [] {
    // ATTN_ISA caps the tiles as it caps the attention kernels
    // (attn/ops/attention.h): avx2 stands for a CPU without AVX-512,
    // portable (or a name the attention kernels refuse) for one without AVX2.
    const char* env = std::getenv("ATTN_ISA");
    const bool set = env && *env;
    if ((!set || std::strcmp(env, "avx512") == 0) && f32_gemm_cpu_has(F32GemmIsa::avx512))
      return F32GemmIsa::avx512;
    if ((!set || std::strcmp(env, "avx512") == 0 || std::strcmp(env, "avx2") == 0) &&
        f32_gemm_cpu_has(F32GemmIsa::avx2))
      return F32GemmIsa::avx2;
    return F32GemmIsa::none;
  }();
  return isa;
}

bool f32_gemm_supported() { return f32_gemm_isa() != F32GemmIsa::none; }

std::int64_t f32_gemm_packed_size(std::int64_t N, std::int64_t K) {
  return ((N + kGroup - 1) / kGroup * K + kAhead) * kGroup;
}

void pack_f32_gemm(const float* w, std::int64_t N, std::int64_t K, std::int64_t ldn,
                   std::int64_t ldk, float* packed) {
  const std::int64_t groups = (N + kGroup - 1) / kGroup;
  if (ldn == 1) {  // a step's 32 floats lie side by side in w
    for (std::int64_t g = 0; g < groups; ++g)
      for (std::int64_t k = 0; k < K; ++k) {
        float* step = packed + (g * K + k) * kGroup;
        for (std::int64_t c = 0; c < kGroup; ++c) {
          const std::int64_t n = g * kGroup + c;
          step[c] = n < N ? w[n + k * ldk] : 0.0f;
        }
      }
  } else {
    // Row n of W after row n, each read in order: a step's 32 floats lie a
    // row of W apart, and gathering them one step at a time waited on the
    // loads. Training packs every forward product's weight on one thread
    // (ops/linear.cpp): on a Zen 1, 1.8 against 2.6 us a 32 x 32 weight and
    // 8 against 15 us a 201 x 32 one (d2l's toy).
    for (std::int64_t g = 0; g < groups; ++g) {
      float* block = packed + g * K * kGroup;
      const std::int64_t n0 = g * kGroup, cols = std::min(kGroup, N - n0);
      if (cols < kGroup) std::fill(block, block + K * kGroup, 0.0f);
      for (std::int64_t c = 0; c < cols; ++c) {
        const float* row = w + (n0 + c) * ldn;
        for (std::int64_t k = 0; k < K; ++k) block[k * kGroup + c] = row[k * ldk];
      }
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
#if defined(__clang__)  // clang ignores the GCC pragma (the fuzz build)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#endif
// GCC 12 warns inside its own AVX-512 intrinsics (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

// No standard-library templates in here: their instances, compiled for
// AVX-512, could be the ones the linker keeps for every caller.

// One row's step: its float broadcast, two FMAs. Named sums, not an array
// (as in ops/int8_gemm.cpp: GCC kept an array's sums on the stack).
#define ATTN_F32_ROW_STEP(r)                           \
  if constexpr (R > r) {                               \
    const __m512 v = _mm512_set1_ps(x[(r)*a.ldx + k]); \
    lo##r = _mm512_fmadd_ps(v, w0, lo##r);             \
    hi##r = _mm512_fmadd_ps(v, w1, hi##r);             \
  }
#define ATTN_F32_ROW_STORE(r) \
  if constexpr (R > r) gemm_tiles::store_row(a.y + (m0 + r) * a.N + n0, lo##r, hi##r, e);

struct F32Tiles512 {
  // How many steps ahead a tile fetches its own weights into L1 (2 KB):
  // they come from L2 or beyond, and the hardware's prefetch alone left
  // the loop waiting on them (docs/design/gemm.md, "f32: attn's own kernel").
  static constexpr std::int64_t kOwnAhead = 16;
  static_assert(kAhead >= kOwnAhead);  // the layout's closing zeros cover the last group's

  // y for rows [m0, m0 + R) and group g: the sums over all of K in
  // registers, while the 128 bytes at pf + 32 k are brought into the L2
  // cache at each step k (the weights a later tile reads), and its own
  // weights kOwnAhead steps on into L1. The next group not into L1: at
  // K 256 a group is 32 KB, and the next one fetched beside it into the
  // 48 KB L1 evicted the lines the chunk's other tiles were about to read.
  // The own steps fetched past the group's end lie in the next group or in
  // the layout's closing steps of zeros (kAhead >= kOwnAhead).
  template <int R>
  __attribute__((target("avx512f"), noinline)) static void tile(const F32GemmArgs& a,
                                                                std::int64_t m0, std::int64_t g,
                                                                const float* pf) {
    static_assert(R >= 1 && R <= gemm_tiles::kTileRows);
    const float* w = a.packed + g * a.K * kGroup;
    const float* x = a.x + m0 * a.ldx;
    const __m512 z = _mm512_setzero_ps();
    __m512 lo0 = z, lo1 = z, lo2 = z, lo3 = z, lo4 = z, lo5 = z, lo6 = z, lo7 = z, lo8 = z, lo9 = z,
           lo10 = z, lo11 = z;
    __m512 hi0 = z, hi1 = z, hi2 = z, hi3 = z, hi4 = z, hi5 = z, hi6 = z, hi7 = z, hi8 = z, hi9 = z,
           hi10 = z, hi11 = z;
    for (std::int64_t k = 0; k < a.K; ++k) {
      const __m512 w0 = _mm512_loadu_ps(w + k * kGroup), w1 = _mm512_loadu_ps(w + k * kGroup + 16);
      _mm_prefetch(reinterpret_cast<const char*>(pf + k * kGroup), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(pf + k * kGroup + 16), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(w + (k + kOwnAhead) * kGroup), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(w + (k + kOwnAhead) * kGroup + 16), _MM_HINT_T0);
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
    const gemm_tiles::FloatEpilogue e = gemm_tiles::float_epilogue(a.bias, a.relu, a.N, n0);
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
};
#undef ATTN_F32_ROW_STEP
#undef ATTN_F32_ROW_STORE

}  // namespace

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#endif

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
    __m256 lo0 = z, lo1 = z, lo2 = z, lo3 = z, lo4 = z, lo5 = z;
    __m256 hi0 = z, hi1 = z, hi2 = z, hi3 = z, hi4 = z, hi5 = z;
    for (std::int64_t k = 0; k < a.K; ++k) {
      const __m256 w0 = _mm256_loadu_ps(w + k * kGroup), w1 = _mm256_loadu_ps(w + k * kGroup + 8);
      _mm_prefetch(reinterpret_cast<const char*>(f + k * kGroup), _MM_HINT_T1);
      ATTN_F32_ROW_STEP8(0)
      ATTN_F32_ROW_STEP8(1)
      ATTN_F32_ROW_STEP8(2)
      ATTN_F32_ROW_STEP8(3)
      ATTN_F32_ROW_STEP8(4)
      ATTN_F32_ROW_STEP8(5)
    }
    const std::int64_t n0 = g * kGroup + 16 * h, cols = a.N - n0;
    const bool full = cols >= 16, hi_cols = cols > 8;
    const __m256i mlo = first_lanes8(cols), mhi = first_lanes8(cols - 8);
    const __m256 blo = a.bias ? _mm256_maskload_ps(a.bias + n0, mlo) : z;
    const __m256 bhi = a.bias ? _mm256_maskload_ps(a.bias + n0 + 8, mhi) : z;
    float* y = a.y + m0 * a.N + n0;
    ATTN_F32_ROW_STORE8(0)
    ATTN_F32_ROW_STORE8(1)
    ATTN_F32_ROW_STORE8(2)
    ATTN_F32_ROW_STORE8(3)
    ATTN_F32_ROW_STORE8(4)
    ATTN_F32_ROW_STORE8(5)
  }

  // The tile of gemm_tiles (R <= 12 rows, group g): blocks of up to 6 rows,
  // the group's first 16 columns, then its last 16 where N reaches them.
  template <int R>
  __attribute__((target("avx2,fma"), noinline)) static void tile(const F32GemmArgs& a,
                                                                 std::int64_t m0, std::int64_t g,
                                                                 const float* pf) {
    static_assert(R >= 1 && R <= gemm_tiles::kTileRows);
    constexpr int kFirst = R <= 6 ? R : (R + 1) / 2, kSecond = R - kFirst;
    const std::int64_t halves = a.N - g * kGroup > 16 ? 2 : 1;
    for (std::int64_t h = 0; h < halves; ++h) {
      block<kFirst>(a, m0, g, h, pf);
      if constexpr (kSecond > 0) block<kSecond>(a, m0 + kFirst, g, h, pf);
    }
  }
};
#undef ATTN_F32_ROW_STEP8
#undef ATTN_F32_ROW_STORE8

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options

// The tiles in gemm_tiles' order (ops/gemm_tiles.h).
void f32_gemm_on(F32GemmIsa isa, const F32GemmArgs& a, std::int64_t g0, std::int64_t g1) {
  if (isa == F32GemmIsa::avx512)
    gemm_tiles::run_tiles<F32Tiles512>(a, a.M, a.packed, a.K * kGroup, kGroup, g0, g1);
  else
    gemm_tiles::run_tiles<F32Tiles256>(a, a.M, a.packed, a.K * kGroup, kGroup, g0, g1);
}

void f32_gemm(const F32GemmArgs& a, std::int64_t g0, std::int64_t g1) {
  f32_gemm_on(f32_gemm_isa(), a, g0, g1);
}

}  // namespace attn::detail
