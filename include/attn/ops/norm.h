// attn/ops/norm.h — layer normalization over the last dim.
#pragma once

#include "attn/core/tensor.h"

namespace attn {

// x: (..., D) f32 or f64; weight, bias: (D) in x's dtype, either may be an
// undefined Tensor (no scale / no shift). Returns (..., D), contiguous.
//
//   mean = sum_j x_j / D,  var = sum_j (x_j - mean)^2 / D   (biased, as PyTorch)
//   rstd = 1 / sqrt(var + eps),  xhat = (x - mean) * rstd
//   y = xhat * weight + bias
//
// Backward, per row with gw = g * weight:
//   dx = rstd * (gw - mean_j(gw) - xhat * mean_j(gw * xhat))
//   dweight = sum over rows of g * xhat,  dbias = sum over rows of g
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

}  // namespace attn
