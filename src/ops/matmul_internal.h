// src/ops/matmul_internal.h — internal: matmul's product for the other op
// files (linear.cpp, quantize.cpp), the checks of a linear layer's
// operands, and switches for testing its kernel paths.
#pragma once

#include <cstdint>

#include "attn/core/tensor.h"

namespace attn::detail {

// Products below this many multiply-adds run on the calling thread: a team's
// fork and join cost more than the second thread gains there (d2l's toy
// model: 2 threads were 5% slower than 1), and far more while another
// process holds a core (fork_ok in attn/core/threads.h). From it on, a
// single product is split into row blocks (ops/row_blocks.h), a batch runs
// on oneDNN's team. (A linear layer's backward runs two small products side
// by side instead, one per thread: linear.cpp.)
inline constexpr std::int64_t kSerialGemmWork = std::int64_t(1) << 22;

// A single f32 product from this many multiply-adds on is cut into row
// blocks that the team's threads compute (ops/row_blocks.h): d2l's toy
// model's forward products (640 x 32 @ 32 x 32 and up) at 2 threads, 1.10x
// its training's tokens per second on an Intel Xeon VM (6 alternating pairs,
// the same trained weights). Below kSerialGemmWork a linear layer's two
// backward products still run side by side instead (linear.cpp).
inline constexpr std::int64_t kRowBlockWork = std::int64_t(1) << 19;

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
