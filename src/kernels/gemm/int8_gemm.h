// src/kernels/gemm/int8_gemm.h — internal: the int8 product on AVX-512 VNNI, its
// dequantization and bias done as the sums leave the registers
// (ops/quantize.cpp's formulas):
//
//   acc[m,n] = sum_k u[m,k] Wq[n,k] - comp[n]      (u = xq + 128, comp[n] = 128 sum_k Wq[n,k])
//   y[m,n]   = fma(float(acc[m,n]), sx[m] * sw[n], b[n])
//
// A tile of up to 12 rows x 32 columns keeps its 24 int32 sums in registers
// over all of K: each step loads 2 x 64 bytes of weights (32 columns x 4 k),
// broadcasts 4 bytes of each row and issues 2 vpdpbusd per row; the rows are
// cut into tiles of equal height, so any M runs at nearly the rate of 12.
// Measured on one thread of the development machine (idle), the tatoeba
// model's shapes (K 256 or 1024, N 256, 1024 or 8,000): 450-520 GMAC/s from
// 32 to 1,024 rows (8,000 columns: 480 at 16 rows, 447 at 8), where oneDNN
// 2.6's VNNI matmul with the separate dequantization pass made 400-450;
// the tiled loop made translation 10% faster with the same bits.
//
// The weights are laid out for it once (pack_int8_gemm): groups of 32
// columns, in each group k in steps of 4, each step 32 columns x 4 bytes,
// zeros where N or K runs out; then 32 steps of zeros, as far as the kernel
// fetches ahead. Row m of u is read 4 bytes at a time from
// u + m * ldu: up to 3 bytes past a row's K are read (they meet zero
// weights), so the buffer needs 3 readable bytes after its last row.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace attn::detail {

// Wq (N x K, row-major) in the kernel's layout.
std::vector<std::int8_t> pack_int8_gemm(const std::int8_t* wq, std::int64_t N, std::int64_t K);

struct Int8GemmArgs {
  const std::uint8_t* x;  // M rows of K u8 values (xq + 128), row m at x + m * ldx
  std::int64_t ldx;
  const float* sx;  // M
  const std::int8_t* packed;  // pack_int8_gemm's layout
  const std::int32_t* comp;  // N
  const float* sw;  // N
  const float* bias;  // N, or null
  std::int64_t M, K, N;
  float* y;  // M x N, row m at y + m * N
};

// Columns [g0, g1) of 32 (the last group may be partial): all M rows.
// On a CPU with AVX-512 VNNI only (int8_supported()).
void int8_gemm(const Int8GemmArgs& a, std::int64_t g0, std::int64_t g1);

// The plain reference: the same results, bit for bit, from Wq itself.
void int8_gemm_reference(const Int8GemmArgs& a, const std::int8_t* wq);

// ---- The product on AVX2, in 7 bits (kernels/gemm/int8_gemm_avx2.cpp) ----
//
// AVX2 has no u8 x s8 dot product into int32; its 8-bit multiply-add,
// vpmaddubsw, multiplies u8 by s8 and adds each pair of products into a
// saturating int16, which vpmaddwd by ones then widens, two pairs at a
// time, into int32. With the VNNI kernel's operands (u up to 255, |Wq| up
// to 127) a pair reaches 64770 and would saturate at 32767 (oneDNN 2.6's
// AVX2 u8 x s8 matmul does: docs/design/precision.md). Here both operands have 7
// bits: xq and Wq in [-63, 63] (scales max / 63; ops/quantize.cpp), the
// activations stored as u = xq + 64 in [1, 127], and comp = 64 sum_k Wq:
//
//   acc[m,n] = sum_k u[m,k] Wq[n,k] - comp[n] = sum_k xq[m,k] Wq[n,k]   (exact)
//   y[m,n]   = fma(float(acc[m,n]), sx[m] * sw[n], b[n])
//
// int8_gemm_reference's formula and Int8GemmArgs, with other numbers than
// the VNNI kernel's. A pair of products is at most 2 x 127 x 63 = 16002, so
// the pairs of two steps of 4 k add in int16 (vpaddw, at most 32004) before
// one vpmaddwd widens them: per row, 16 columns and 8 k, two broadcasts,
// four vpmaddubsw, two vpaddw, two vpmaddwd and two vpaddd; the multiplies
// share two ports, and there are 3 per 64 products instead of 4. The
// exact 8-bit kernel it replaced (|Wq| times the activation flipped where
// Wq < 0: the VNNI kernel's bits) issued a vpxor, a vpmaddubsw, a vpmaddwd
// and a vpaddd per step of 32 products. On an Intel Xeon with AVX-512
// (model 167, AVX2 forced, 2026-12-03, one thread, 32 x 256 x 1,024,
// medians of 3 alternating runs): 105 GMAC/s, against 97 for 7-bit
// activations alone (one vpmaddwd per step) and 70 for the exact kernel;
// translating 2,000 sentences in int8: greedy 1.01 s against 1.42 s
// (exact), beam 4 3.0 s against 4.4 s; held-out BLEU of the tatoeba model
// within 0.2 of f32 (docs/design/precision.md).
//
// The weights are pack_int8_gemm's layout; each block is S <= 4 rows x 16
// columns (8 int32 sums in registers over all of K), the rows of a
// gemm_tiles tile cut into blocks of equal height. Row m of u is read 4
// bytes at a time from x + m * ldx: up to 3 bytes past a row's K are read
// (they meet zero weights), so the buffer needs 3 readable bytes after its
// last row. u must stay within [0, 127] and |Wq| within 63: larger operands
// wrap the int16 sums.

// Whether this CPU runs int8_gemm_avx2 (AVX2 and FMA).
bool int8_gemm_avx2_cpu();

// Columns [32 g0, 32 g1) (the last group may be partial): all M rows, 7-bit
// operands. On a CPU with AVX2 and FMA only (int8_gemm_avx2_cpu()). Its
// plain reference is int8_gemm_reference.
void int8_gemm_avx2(const Int8GemmArgs& a, std::int64_t g0, std::int64_t g1);

// ---- The product on AVX-VNNI (kernels/gemm/int8_gemm_avx_vnni.cpp) ----
//
// The CPUs with AVX2 and AVX-VNNI but no AVX-512 (Intel's cores since Alder
// Lake) have vpdpbusd on 256-bit registers: the VNNI kernel's operands
// (u = xq + 128, |Wq| <= 127, comp = 128 sum_k Wq) and so its bits, one
// instruction per 32 products where the AVX2 kernel issues 3 multiplies per
// 64, and 8-bit activations where it has 7. Blocks of S <= 6 rows x 16
// columns (12 int32 sums in registers over all of K), pack_int8_gemm's
// layout, the same 3 readable bytes past the last row.

// Whether this CPU runs int8_gemm_avx_vnni (AVX2, FMA and AVX-VNNI).
bool int8_gemm_avx_vnni_cpu();

// Columns [32 g0, 32 g1) (the last group may be partial): all M rows. On a
// CPU with AVX-VNNI only (int8_gemm_avx_vnni_cpu()). Its plain reference is
// int8_gemm_reference.
void int8_gemm_avx_vnni(const Int8GemmArgs& a, std::int64_t g0, std::int64_t g1);

// The plain loops of both references: y[m, n] = fma(sum_k x[m, k] wq[n, k]
// - comp[n], sx[m] sw[n], bias[n]), the sums in int32 (comp may be null).
template <class TX>
void int8_reference_rows(const TX* x, std::int64_t ldx, const std::int8_t* wq,
                         const std::int32_t* comp, const float* sx, const float* sw,
                         const float* bias, std::int64_t M, std::int64_t N, std::int64_t K,
                         float* y) {
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      std::int32_t acc = 0;
      for (std::int64_t k = 0; k < K; ++k)
        acc += static_cast<std::int32_t>(x[m * ldx + k]) * static_cast<std::int32_t>(wq[n * K + k]);
      if (comp) acc -= comp[n];
      y[m * N + n] = std::fma(static_cast<float>(acc), sx[m] * sw[n], bias ? bias[n] : 0.0f);
    }
}

}  // namespace attn::detail
