// The f32 product of kernels/gemm/f32_gemm.h: its layout, its plain
// reference and the choice of tiles (f32_gemm_avx512.cpp, f32_gemm_avx2.cpp).
#include "kernels/gemm/f32_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/gemm/gemm_tiles.h"
#include "kernels/vec/vec_form.h"

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
  // The best the CPU has, capped by ATTN_ISA (kernels/vec/vec_form.h).
  static const F32GemmIsa isa = [] {
    const VecForm cap = form_cap();  // an unknown name throws
    if (cap == VecForm::avx512 && f32_gemm_cpu_has(F32GemmIsa::avx512)) return F32GemmIsa::avx512;
    if (cap >= VecForm::avx2 && f32_gemm_cpu_has(F32GemmIsa::avx2)) return F32GemmIsa::avx2;
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

// The tiles in gemm_tiles' order (kernels/gemm/gemm_tiles.h).
void f32_gemm_on(F32GemmIsa isa, const F32GemmArgs& a, std::int64_t g0, std::int64_t g1) {
  if (isa == F32GemmIsa::avx512)
    f32_gemm_avx512(a, g0, g1);
  else
    f32_gemm_avx2(a, g0, g1);
}

void f32_gemm(const F32GemmArgs& a, std::int64_t g0, std::int64_t g1) {
  f32_gemm_on(f32_gemm_isa(), a, g0, g1);
}

}  // namespace attn::detail
