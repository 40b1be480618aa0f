// The f32 product of ops/f32_gemm.h: its layout, its plain reference, and
// the AVX-512 kernel, compiled for that whatever the build targets and called
// only where the CPU has it.
#include "ops/f32_gemm.h"

#include <immintrin.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ops/gemm_tiles.h"

namespace attn::detail {

using gemm_tiles::kAhead;
using gemm_tiles::kGroup;

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

struct F32Tiles {
  // y for rows [m0, m0 + R) and group g: the sums over all of K in
  // registers, while the 128 bytes at pf + 32 k are brought into the L2
  // cache at each step k (the weights a later tile reads). Not into L1: at
  // K 256 a group is 32 KB, and the next one fetched beside it into the
  // 48 KB L1 evicted the lines the chunk's other tiles were about to read
  // (docs/design.md, "f32: attn's own kernel").
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

// The tiles in gemm_tiles' order (ops/gemm_tiles.h).
void f32_gemm(const F32GemmArgs& a, std::int64_t g0, std::int64_t g1) {
  gemm_tiles::run_tiles<F32Tiles>(a, a.M, a.packed, a.K * kGroup, kGroup, g0, g1);
}

}  // namespace attn::detail
