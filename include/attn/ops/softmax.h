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

// Softmax over the last dim where row r sees only its first lengths[r]
// entries — d2l's masked_softmax, fused. x: (..., K); lengths: x's shape
// without the last dim (any dtype), each in [0, K]. The result equals
// softmax(where(k < length, x, -1e6)): masked entries are exactly 0 and a row
// of length 0 is uniform (1/K). As in d2l, masked entries (and every entry of
// a length-0 row) were replaced by a constant, so their gradient is 0.
// dx_j = y_j (g_j - sum_k g_k y_k) for j < length, else 0
Tensor masked_softmax_lengths(const Tensor& x, const Tensor& lengths);

// Plain reference kernels (one scalar loop per row, no autograd), kept to
// check the fast kernels against.
Tensor softmax_reference(const Tensor& x);
Tensor log_softmax_reference(const Tensor& x);

}  // namespace attn
