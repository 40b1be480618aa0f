// src/kernels/gemm/bf16_gemm.h — internal: the bf16 product of a frozen Linear weight
// on AVX-512 BF16, f32 sums, its bias and ReLU done as the sums leave the
// registers:
//
//   y[m,n] = sum_k x[m,k] W[n,k]  (+ b[n])  (then max(y, 0))
//
// x and W in bf16, the sums in f32: VDPBF16PS adds two products (k, k+1) to
// each sum per step, k = 0, 2, 4, ...; an element depends on its row of x
// and its row of W only, never on the other rows of the batch. The same
// loop as kernels/gemm/f32_gemm.h (tiles of up to 12 rows x 32 columns, 24 sums in
// registers, the next column group's weights fetched while a group's tiles
// run), two k per step. Measured on one thread of the development machine
// (idle), 32 rows on weights 4 times the size of the last cache: 460-470
// GFLOP/s on the tatoeba model's shapes (K 256 or 1024, N 256 to 8,000),
// where oneDNN 2.6's packed bf16 matmul made 310-360 inside the translator.
//
// The weights are laid out for it once (pack_bf16_gemm): groups of 32
// columns, in each group k in pairs, each step 32 columns x 2 bf16 (column
// c's pair in the step's 32-bit lane c), zeros where N or K runs out; then
// 32 steps of zeros, as far as the kernel fetches ahead. Row m of x is read
// 4 bytes at a time from x + m * ldx: ldx must be even, and where K is odd
// each row needs a zero (any finite bf16) after its K values.
#pragma once

#include <cstdint>

namespace attn::detail {

// Whether the CPU has AVX-512 F, BW, VL and BF16 (what bf16 products need;
// attn::bf16_supported() adds ATTN_NO_BF16).
bool bf16_cpu_has();

// Whether the CPU runs the kernel (bf16_cpu_has()), and ATTN_ISA, if set,
// names avx512. Callers also ask attn::bf16_supported() (ATTN_NO_BF16).
bool bf16_gemm_supported();

// The bf16 values pack_bf16_gemm writes for W (N x K).
std::int64_t bf16_gemm_packed_size(std::int64_t N, std::int64_t K);

// W (N x K bf16 bits, element (n, k) at w[n * ldn + k * ldk]) in the
// kernel's layout, written to `packed` (bf16_gemm_packed_size values).
void pack_bf16_gemm(const std::uint16_t* w, std::int64_t N, std::int64_t K, std::int64_t ldn,
                    std::int64_t ldk, std::uint16_t* packed);

struct Bf16GemmArgs {
  const std::uint16_t* x;  // M rows of K bf16 values, row m at x + m * ldx (ldx even)
  std::int64_t ldx;
  const std::uint16_t* packed;  // pack_bf16_gemm's layout
  const float* bias;  // N, or null
  bool relu;
  std::int64_t M, K, N;
  float* y;  // M x N, row m at y + m * N
};

// Columns [32 g0, 32 g1) (the last group may be partial): all M rows.
// Only where bf16_gemm_supported().
void bf16_gemm(const Bf16GemmArgs& a, std::int64_t g0, std::int64_t g1);

}  // namespace attn::detail
