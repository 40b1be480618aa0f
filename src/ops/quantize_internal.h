// src/ops/quantize_internal.h — internal: the int8 Linear hook for matmul.cpp,
// and the parts of the int8 product that tests compare (ops/quantize.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "attn/core/tensor.h"

namespace attn::detail {

// Inside a QuantizeScope: y = linear(x, weight, bias) as an int8 product when
// weight is one of the scope's frozen parameters and the product is one int8
// takes (f32, not recording gradients, K <= 65536); otherwise nothing, and
// linear() computes in f32. Shapes are checked by linear() first.
std::optional<Tensor> quantized_linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// The int32 sums acc[m,n] = sum_k xq[m,k] Wq[n,k] (i32 (M, N)) for x (M, K)
// and weight (N, K): through the fast path (primitive or loops, as chosen
// for the size), and through the reference's plain loops.
Tensor int8_accumulators(const Tensor& x, const Tensor& weight);
Tensor int8_accumulators_reference(const Tensor& x, const Tensor& weight);

// Products of at most this many multiply-adds run as integer loops, above it
// on oneDNN's primitive (default 2^15). Returns the previous value. For tests.
std::int64_t set_int8_loop_work(std::int64_t work);

// oneDNN's name for the implementation of the int8 product of this size
// ("brg:avx512_core_vnni"), or "" when it has no VNNI kernel for it.
std::string int8_primitive_impl(std::int64_t M, std::int64_t K, std::int64_t N);

}  // namespace attn::detail
