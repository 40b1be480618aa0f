// src/ops/matmul_internal.h — internal: matmul's product for the other op
// files (linear.cpp, quantize.cpp), the checks of a linear layer's
// operands, and switches for testing its kernel paths.
#pragma once

#include <cstdint>

#include "attn/core/tensor.h"

namespace attn::detail {

// A batch of products below this many multiply-adds runs on the calling
// thread, from it on on oneDNN's team; a linear layer's two backward
// products below it run side by side, one per thread (linear.cpp). While
// the team's cores sit far apart, single products below it times
// grain_scale() run their row blocks on the calling thread (matmul.cpp), as
// all do while another process holds a core (fork_ok in
// attn/core/threads.h).
inline constexpr std::int64_t kSerialGemmWork = std::int64_t(1) << 22;

// A single f32 product from this many multiply-adds on is cut into row
// blocks that the team's threads compute (ops/row_blocks.h): 2^19 where
// oneDNN runs AVX-512 kernels, whose rows come out with the same bits in a
// block of any height, so that the bits do not depend on the thread count
// either (d2l's toy model's forward products, 640 x 32 @ 32 x 32 and up, on
// 2 threads made its training 1.10x faster on an Intel Xeon VM, with the
// same weights). oneDNN's AVX2 sgemm gives a row other bits in a block of
// another height, so without AVX-512 the line is kSerialGemmWork, as
// products up to it stay the same on any thread count there too.
std::int64_t row_block_work();

// Whether a Linear layer's f32 product whose weight is not frozen (training)
// runs on attn's own kernel (kernels/gemm/f32_gemm.h), the weight laid out for it at
// each call, rather than on oneDNN: where the kernel runs (AVX2 and FMA, or
// AVX-512) and oneDNN's f32 products are not cut into row blocks (no AVX-512
// in oneDNN, row_block_work() == kSerialGemmWork). The kernel's rows come
// out with the same bits whatever the rows around them, so its products
// share the threads by rows or by columns at any size (linear.cpp).
bool linear_on_f32_kernel();

// Operand lines (rows, or the columns of a transposed view) a multiple of
// kAliasedLd floats (4 KB) apart fall on the same cache sets, and oneDNN's
// packing of them conflicts with itself: large products copy such an operand
// with its lines kLinePad floats further apart (unalias, below), and
// linear_relu's backward writes its masked gradient that way (linear.cpp).
inline constexpr std::int64_t kAliasedLd = 1024;
inline constexpr std::int64_t kLinePad = 16;

// Whether oneDNN's f32 products may give other bits for the same operand
// with its rows at another spacing: its AVX-512 kernels do (on an Intel Xeon,
// linear_relu's dx with g's rows 1040 against 1024 floats apart), its AVX2
// ones did not (a Zen 1). linear_relu's backward spaces its gradient's rows
// only where they do not (linear.cpp).
bool f32_product_bits_depend_on_ld();

// `lines` lines of `inner` floats, `ld` apart from p, operand of a product of
// `work` multiply-adds whose sum runs across them: where ld is a multiple of
// kAliasedLd and the copy is a small part of the product, copies them
// kLinePad floats further apart into `copy` and points p and ld at it; else
// leaves all three alone (unalias.cpp).
void unalias(const float*& p, std::int64_t& ld, std::int64_t lines, std::int64_t inner,
             std::int64_t work, Tensor& copy);

// a (..., M, K) @ b (..., K, N) without autograd (matmul's checks and
// kernels; `op` names the caller in errors).
Tensor product(const Tensor& a, const Tensor& b, const char* op);

// The operands of a linear layer, x (..., K), weight (N, K), bias (N) or
// undefined: defined, of those shapes, else the error naming `op` (dtypes
// are the caller's to check).
void check_linear_shapes(const Tensor& x, const Tensor& weight, const Tensor& bias, const char* op);

// Batched f32 products that do not fold into one GEMM run on oneDNN's matmul
// primitive (on, the default) or, off, on one dnnl_sgemm per batch item
// (parallel over items when they are small). Tests compare the two.
void set_matmul_batched_primitive(bool on);

}  // namespace attn::detail
