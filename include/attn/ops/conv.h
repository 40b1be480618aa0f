// attn/ops/conv.h — one-dimensional convolution along the tokens of a sequence.
//
// Batch first and channels last, as every layout in attn:
//   X (B, n, d_in), weight (d_out, d_in, k), bias (d_out) or undefined
//   -> Y (B, n, d_out)
// weight and bias have the shapes and the meaning of PyTorch's
// nn.Conv1d(d_in, d_out, k, padding='same') (whose input is X transposed to
// (B, d_in, n)):
//   Y[b, t, o] = bias[o] + sum_{j < k} sum_{c < d_in} weight[o, c, j] X[b, t + j - p, c]
// with p = (k - 1) / 2 (integer division), X read as zero outside [0, n):
// stride 1, zero padding, n kept. An odd k pads p on both sides (PyTorch's
// padding=(k-1)/2); an even k pads k/2 - 1 on the left and k/2 on the right,
// as PyTorch's padding='same' does. f32 or f64, all operands of one dtype;
// B and n may be 0. Differentiable in X, weight and bias:
//   dX[b, s, c]    = sum_j sum_o g[b, s - j + p, o] weight[o, c, j]
//   dweight[o,c,j] = sum_{b,t} g[b, t, o] X[b, t + j - p, c]
//   dbias[o]       = sum_{b,t} g[b, t, o]
// Costs O(B n k d_in d_out) multiply-adds, and a (B n, k d_in) buffer.
#pragma once

#include "attn/core/tensor.h"

namespace attn {

// The fast path: X unfolded into a (B n, k d_in) matrix of shifted rows
// (im2col), then one matrix product with the weight read as (d_out, k d_in),
// the bias added in the same pass. Throws ShapeError for other shapes and
// DTypeError for mixed or integer dtypes, naming conv1d.
Tensor conv1d(const Tensor& X, const Tensor& weight, const Tensor& bias = Tensor());

// The reference: the sum above in plain loops, accumulating in double. Same
// arguments and result as conv1d; no autograd. For tests and benchmarks.
Tensor conv1d_reference(const Tensor& X, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace attn
