// attn/ops/norm.h — layer normalization over the last dim.
#pragma once

#include "attn/core/rng.h"
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

// layer_norm(dropout_add(base, x, p, training, gen), weight, bias, eps) as one
// op: d2l's AddNorm, ln(dropout(Y) + X), with X = base and Y = x.
//   s = base + keep * x / (1 - p)   (keep: the mask ops dropout draws from gen)
//   y = layer_norm(s)
// The sums and the normalization are made block by block while in cache, and
// the backward regenerates the mask (Philox) instead of storing it:
//   dbase = the layer norm's input gradient,  dx = keep * dbase / (1 - p),
//   dweight, dbias as layer_norm's.
// The same numbers as the two ops, bit for bit, and the same draws from gen.
// Outside training (or p = 0 or 1) it is the two ops. base, x: (..., D) of one
// shape and floating dtype; weight, bias: (D) or undefined.
Tensor dropout_add_layer_norm(const Tensor& base, const Tensor& x, double p, bool training,
                              Generator& gen, const Tensor& weight, const Tensor& bias,
                              double eps = 1e-5);

}  // namespace attn
