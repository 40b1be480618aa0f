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
