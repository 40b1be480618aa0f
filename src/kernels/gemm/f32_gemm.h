// src/kernels/gemm/f32_gemm.h — internal: the f32 product of a frozen Linear weight
// on attn's own kernel, its bias and ReLU done as the sums leave the
// registers:
//
//   y[m,n] = sum_k x[m,k] W[n,k]  (+ b[n])  (then max(y, 0))
//
// the sum taken in the order k = 0, 1, ..., K-1, one fused multiply-add per
// term from 0, then the bias added: every element depends on its row of x and
// its row of W alone, never on the other rows of the batch, nor on the
// instruction set (the AVX-512 and the AVX2 tiles give the same bits).
//
// AVX-512: a tile of up to 12 rows x 32 columns keeps its 24 sums in
// registers over all of K: each step loads 2 x 16 floats of weights,
// broadcasts one float of each row and issues 2 FMAs per row
// (kernels/gemm/int8_gemm.h has the same loop in int8). Measured on one thread of the
// development machine (idle), the tatoeba model's shapes at 32 rows (K 256 or
// 1024; N 256, 768, 1024 or 8,000): 245-261 GFLOP/s, 87-93% of the core's
// FMA peak, where oneDNN 2.6's sgemm made 125-193 (K 1024 x N 256 at 16 rows:
// 261 against 84); from 320 rows on both make 230-260.
//
// AVX2 with FMA (16 registers of 8 floats): the same tiles, each computed as
// up to two blocks of at most 6 rows x 16 columns (12 sums, 2 registers of
// weights, a broadcast), one half of the group's columns after the other.
// On one thread of a 2-core AMD EPYC Zen 1 (a 256-bit FMA a cycle), on 64
// weights of 256 x 1024 (more than the last cache, as a translator's): 29,
// 32 and 32 GFLOP/s at 16, 32 and 128 rows, where oneDNN 2.6's packed
// primitive made 22, 24 and 26 (docs/design/gemm.md, "The f32 kernel on AVX2").
//
// The weights are laid out for it once (pack_f32_gemm): groups of 32 columns,
// in each group k after k, each step 32 floats, zeros where N runs out; then
// 32 steps of zeros, as far as the kernel fetches ahead.
#pragma once

#include <cstdint>

namespace attn::detail {

// The kernel's instruction sets.
enum class F32GemmIsa { none, avx2, avx512 };

// Whether this CPU can run the tiles of `isa` (AVX2: AVX2 and FMA; AVX-512:
// AVX-512 F).
bool f32_gemm_cpu_has(F32GemmIsa isa);

// The tiles f32_gemm runs: the best this CPU has, capped by ATTN_ISA when it
// is set (avx2: AVX2's; portable: none, and callers take oneDNN's path, as
// on a CPU without AVX2).
F32GemmIsa f32_gemm_isa();

// f32_gemm_isa() != none.
bool f32_gemm_supported();

// The floats pack_f32_gemm writes for W (N x K).
std::int64_t f32_gemm_packed_size(std::int64_t N, std::int64_t K);

// W (N x K, element (n, k) at w[n * ldn + k * ldk]) in the kernel's layout,
// written to `packed` (f32_gemm_packed_size floats).
void pack_f32_gemm(const float* w, std::int64_t N, std::int64_t K, std::int64_t ldn,
                   std::int64_t ldk, float* packed);

struct F32GemmArgs {
  const float* x;  // M rows of K floats, row m at x + m * ldx
  std::int64_t ldx;
  const float* packed;  // pack_f32_gemm's layout
  const float* bias;  // N, or null
  bool relu;
  std::int64_t M, K, N;
  float* y;  // M x N, row m at y + m * N
};

// Columns [32 g0, 32 g1) (the last group may be partial): all M rows, on
// f32_gemm_isa()'s tiles. Only where f32_gemm_supported().
void f32_gemm(const F32GemmArgs& a, std::int64_t g0, std::int64_t g1);

// The same on the tiles of `isa` (not none), which this CPU must have
// (f32_gemm_cpu_has): the tests run each set the CPU has.
void f32_gemm_on(F32GemmIsa isa, const F32GemmArgs& a, std::int64_t g0, std::int64_t g1);

// The tiles of one instruction set, each in its own translation unit
// (f32_gemm_avx512.cpp, f32_gemm_avx2.cpp), called by f32_gemm_on.
void f32_gemm_avx512(const F32GemmArgs& a, std::int64_t g0, std::int64_t g1);
void f32_gemm_avx2(const F32GemmArgs& a, std::int64_t g0, std::int64_t g1);

// The plain reference: the same results, bit for bit, from W (N x K,
// row-major) itself.
void f32_gemm_reference(const F32GemmArgs& a, const float* w);

}  // namespace attn::detail
