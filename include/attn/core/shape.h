// attn/core/shape.h — shapes, strides and dimension arithmetic.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

using Shape = std::vector<std::int64_t>;

// Number of elements of a shape (1 for a scalar shape []).
std::int64_t shape_numel(const Shape& shape);

// Row-major strides, in elements.
Shape contiguous_strides(const Shape& shape);

// "[2, 3, 4]"
std::string shape_str(const Shape& shape);

// Wraps a possibly negative dim into [0, ndim); throws ValueError naming `op`.
std::int64_t normalize_dim(std::int64_t dim, std::int64_t ndim, std::string_view op);

// The broadcast of two shapes (numpy rules); throws ShapeError naming `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);

}  // namespace attn
