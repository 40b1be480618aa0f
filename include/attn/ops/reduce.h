// attn/ops/reduce.h — reductions over dims.
//
// `dims` may be negative; an empty `dims` means all dims. With keepdim the
// reduced dims stay as size 1 (so the result broadcasts against the input).
#pragma once

#include <vector>

#include "attn/core/tensor.h"

namespace attn {

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
// Max over one dim; the gradient flows to the first maximal element.
Tensor max(const Tensor& x, std::int64_t dim, bool keepdim = false);
// Index (i64) of the first maximal element along `dim`; not differentiable.
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim = false);

// Sums a broadcast gradient back down to `shape` (the inverse of expand).
Tensor sum_to(const Tensor& x, const Shape& shape);

// max |a - b| over all elements, in f64, for comparing two results (tests,
// checks, demos); not differentiable. Same shape required (no broadcasting);
// any dtypes and layouts. Equal values differ by 0 (infinities included); a
// NaN in either tensor gives NaN, so that a comparison with a tolerance fails.
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace attn
