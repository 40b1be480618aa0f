#include "attn/core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attn/core/error.h"

namespace attn {

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::int64_t normalize_dim(std::int64_t dim, std::int64_t ndim, std::string_view op) {
  std::int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  ATTN_CHECK(dim >= lo && dim <= hi, ValueError,
             "{}: dim {} is out of range for a tensor of {} dims (expected {}..{})", op, dim, ndim,
             lo, hi);
  return dim < 0 ? dim + (ndim == 0 ? 1 : ndim) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    ATTN_CHECK(da == db || da == 1 || db == 1, ShapeError,
               "{}: shapes {} and {} cannot be broadcast together", op, shape_str(a), shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace attn
