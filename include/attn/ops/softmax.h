// attn/ops/softmax.h — softmax and log-softmax over the last dim.
//
// x: (..., D), f32 or f64, any layout -> y: (..., D), contiguous, same dtype.
// Every row is shifted by its max first, so large inputs do not overflow and a
// row of equal values (d2l's masked rows, all -1e6) gives the uniform 1/D —
// never NaN, forward or backward. (A row of all -inf has no max to shift by and
// gives NaN, as in PyTorch: mask with -1e6, not -inf.)
#pragma once

#include "attn/core/tensor.h"

namespace attn {

// y[..., j] = exp(x[..., j] - m) / sum_k exp(x[..., k] - m),  m = max_k x[..., k]
// dx = y * (g - sum_k g_k y_k)
Tensor softmax(const Tensor& x);

// y[..., j] = x[..., j] - m - log(sum_k exp(x[..., k] - m))
// dx = g - exp(y) * sum_k g_k
Tensor log_softmax(const Tensor& x);

// Plain reference kernels (one scalar loop per row, no autograd), kept to
// check the fast kernels against.
Tensor softmax_reference(const Tensor& x);
Tensor log_softmax_reference(const Tensor& x);

}  // namespace attn
