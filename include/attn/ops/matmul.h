// attn/ops/matmul.h — matrix products.
//
// Shapes follow torch.matmul for operands of at least 2 dims:
//   a (..., M, K) @ b (..., K, N) -> (..., M, N)
// where the leading (batch) dims broadcast against each other, so
//   (M, K) @ (K, N)          -> (M, N)
//   (B, T, D) @ (D, N)       -> (B, T, N)     the Linear case: one GEMM of B*T rows
//   (B, M, K) @ (B, K, N)    -> (B, M, N)
//   (B, 1, M, K) @ (H, K, N) -> (B, H, M, N)
// f32 runs on oneDNN (dnnl_sgemm and its matmul primitive; in a bf16
// PrecisionScope, attn/ops/precision.h, on bf16 operands with f32
// accumulation); f64 (gradient checks, references) on plain loops. Operands
// whose last two dims are a transposed view are read in place; a broadcast
// operand is never materialized. Differentiable in both inputs:
//   dA = g @ B^T,  dB = A^T @ g,  each summed back over broadcast batch dims.
#pragma once

#include "attn/core/tensor.h"

namespace attn {

// a (..., M, K) @ b (..., K, N) -> (broadcast(...), M, N). Both f32 or both f64.
// Throws ShapeError (fewer than 2 dims, inner dims differ, batch dims that do
// not broadcast) or DTypeError (dtypes differ, integer dtype).
Tensor matmul(const Tensor& a, const Tensor& b);

// a (B, M, K) @ b (B, K, N) -> (B, M, N): strictly 3-D, equal batch sizes.
Tensor bmm(const Tensor& a, const Tensor& b);

// The affine map of a Linear layer: x (..., K), weight (N, K), bias (N) or
// undefined -> y (..., N) = x @ weight^T + bias, one GEMM over the rows of x
// with the bias added in the same pass (one op, one node). Differentiable:
//   dx = g @ weight,  dweight = g_rows^T @ x_rows,  dbias = sum over rows of g.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// The position of the largest element of each row of linear(x, weight,
// bias): x (..., K) -> i64 (...), the first of equal largest elements, NaNs
// passed over unless a row's first element is one (then 0): decoding's
// greedy choice, the same positions as argmax over linear()'s rows. Not
// differentiable. Inside a PrecisionScope in f32 given the weight, on a CPU
// with AVX-512 VNNI, for a weight of 1,024 rows or more on the path where
// linear() runs attn's f32 kernel, the rows are first screened by an int8
// product with a proven bound on its error, and only the positions that can
// still be the largest are computed in f32, exactly as linear() computes
// them (docs/design/gemm.md, "Greedy decoding's int8 screen"); the answer is the
// same. ATTN_NO_ARGMAX_SCREEN=1 turns the screen off.
Tensor linear_argmax(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// relu(linear(x, weight, bias)) as one op: the activation is applied in the
// pass that adds the bias, and only the output y is kept for the backward
// (relu' is [y > 0]), not the pre-activation. The same numbers as the two ops
// (bit for bit). The first layer of the Transformer's position-wise FFN.
//   g' = g [y > 0],  dx = g' @ weight,  dweight = g'_rows^T @ x_rows,  dbias = sum g'.
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// The documented reference: the same product as matmul, computed with plain
// loops over the strided inputs, accumulating in double (f32 or f64; result
// in the inputs' dtype). No autograd. For tests and benchmarks.
Tensor matmul_reference(const Tensor& a, const Tensor& b);

}  // namespace attn
