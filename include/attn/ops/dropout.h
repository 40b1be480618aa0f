// attn/ops/dropout.h — inverted dropout with a regenerated (never stored) mask.
#pragma once

#include "attn/core/rng.h"
#include "attn/core/tensor.h"

namespace attn {

// x: any shape, f32 or f64. Returns x itself when !training or p == 0, zeros
// (gradient 0) when p == 1, else a contiguous tensor of x's shape with
//   y_i = x_i / (1 - p)  if philox_uniform(seed, offset, i) >= p,  else 0,
// i the row-major index of the element, (seed, offset) = (gen.seed(),
// gen.reserve(numel)). The mask is not stored: the backward regenerates it
// from (seed, offset), dx_i = g_i / (1 - p) on kept elements, 0 elsewhere.
// p outside [0, 1] is a ValueError (checked in eval mode too).
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);
// The same with default_generator().
Tensor dropout(const Tensor& x, double p, bool training = true);

// base + dropout(x, p, training, gen) in one pass (the Transformer's residual
// connection, AddNorm): the same mask, numbers and generator use as the two
// ops, one output tensor instead of two. base and x: same shape and dtype.
// d base = g,  d x = dropout's backward of g.
Tensor dropout_add(const Tensor& base, const Tensor& x, double p, bool training, Generator& gen);
Tensor dropout_add(const Tensor& base, const Tensor& x, double p, bool training = true);

}  // namespace attn
