// src/ops/positions_internal.h — internal: rotary's angles for the attention
// kernels (ops/attention.cpp), from the table ops/positions.cpp keeps.
#pragma once

#include <cstdint>

#include "attn/core/tensor.h"

namespace attn::detail {

// (2, P', D / 2) in `dtype`, P' >= P: [0][t][i] = cos(t theta_i),
// [1][t][i] = sin(t theta_i), theta_i = base^(-2i / D), for positions t < P'.
// Kept and shared between calls: read it, never write it.
Tensor rotary_angles(std::int64_t D, double base, std::int64_t P, DType dtype);

}  // namespace attn::detail
