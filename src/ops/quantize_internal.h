// src/ops/quantize_internal.h — internal: the int8 Linear hook for matmul.cpp,
// and the parts of the int8 product that tests compare (ops/quantize.h).
#pragma once

#include <cstdint>
#include <optional>

#include "attn/core/tensor.h"

namespace attn::detail {

// Inside a QuantizeScope: y = linear(x, weight, bias) as an int8 product when
// weight is one of the scope's frozen parameters and the product is one int8
// takes (f32, not recording gradients, K <= 65536); otherwise nothing, and
// linear() computes in f32. Shapes are checked by linear() first.
std::optional<Tensor> quantized_linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// The int32 sums acc[m,n] = sum_k xq[m,k] Wq[n,k] (i32 (M, N)) for x (M, K)
// and weight (N, K): through the portable path's integer loops (the VNNI
// kernel's own test is ops/int8_gemm_test), and through plain loops.
Tensor int8_accumulators(const Tensor& x, const Tensor& weight);
Tensor int8_accumulators_reference(const Tensor& x, const Tensor& weight);

}  // namespace attn::detail
