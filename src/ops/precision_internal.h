// src/ops/precision_internal.h — internal: the bf16 operands of a product.
#pragma once

#include <cstdint>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::detail {

// 1 + the largest element offset of x from its first element (0 when empty;
// -1 for a negative stride): the floats a copy of x's layout covers.
std::int64_t storage_span(const Tensor& x);

// The bf16 bits of the `span` floats from x's first element on, in x's own
// layout: a frozen parameter's kept copy (PrecisionScope), else `scratch`
// (grown as needed) filled now.
const std::uint16_t* bf16_span(const Tensor& x, std::int64_t span,
                               std::vector<std::uint16_t>& scratch);

}  // namespace attn::detail
