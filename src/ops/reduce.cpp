// Reductions: sum, mean, max, argmax, sum_to; max_abs_diff.
//
//   sum   d/dx = g broadcast back over the reduced dims
//   mean  d/dx = g / count, broadcast back
//   max   d/dx = g at the first maximal element of each row, 0 elsewhere
//
// Kernel: the reduced dims are moved last (a copy only when the layout needs
// it) and each output element reduces one contiguous row; reducing a prefix of
// a contiguous tensor (bias gradients) adds rows without any copy.
#include <algorithm>
#include <cmath>
#include <limits>

#include "attn/autograd/node.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "core/parallel.h"
#include "core/strided.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;

namespace {

struct Plan {
  std::vector<bool> reduced;  // per input dim
  Shape keep_shape;  // input shape with reduced dims set to 1
  Shape out_shape;  // keep_shape without them unless keepdim
  std::int64_t count = 1;  // elements reduced into each output
};

Plan make_plan(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
               const char* op) {
  Plan p;
  std::int64_t n = x.dim();
  p.reduced.assign(n, dims.empty());
  for (auto d : dims) {
    std::int64_t k = normalize_dim(d, n, op);
    ATTN_CHECK(!p.reduced[k] || dims.empty(), ValueError, "{}: dim {} appears twice", op, d);
    p.reduced[k] = true;
  }
  for (std::int64_t d = 0; d < n; ++d) {
    if (p.reduced[d]) {
      p.count *= x.shape()[d];
      p.keep_shape.push_back(1);
      if (keepdim) p.out_shape.push_back(1);
    } else {
      p.keep_shape.push_back(x.shape()[d]);
      p.out_shape.push_back(x.shape()[d]);
    }
  }
  return p;
}

// x with kept dims first and reduced dims last, contiguous, as [outer, inner].
Tensor rows_view(const Tensor& x, const Plan& p) {
  std::vector<std::int64_t> perm;
  for (std::int64_t d = 0; d < x.dim(); ++d)
    if (!p.reduced[d]) perm.push_back(d);
  for (std::int64_t d = 0; d < x.dim(); ++d)
    if (p.reduced[d]) perm.push_back(d);
  Tensor xp = x.detach().permute(perm).contiguous();
  std::int64_t inner = p.count,
               outer = inner == 0 ? 0 : x.numel() / std::max<std::int64_t>(inner, 1);
  if (inner == 0) outer = shape_numel(p.keep_shape);
  return xp.reshape({outer, inner});
}

// Is the reduction over a leading run of dims of a contiguous tensor?
bool is_prefix_reduction(const Tensor& x, const Plan& p) {
  if (!x.is_contiguous()) return false;
  bool seen_kept = false;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    if (!p.reduced[d])
      seen_kept = true;
    else if (seen_kept && x.shape()[d] != 1)
      return false;
  }
  return true;
}

template <class T>
Tensor sum_kernel(const Tensor& x, const Plan& p) {
  Tensor out = Tensor::empty(p.keep_shape, x.dtype());
  T* po = out.data<T>();
  std::int64_t outer = shape_numel(p.keep_shape);
  // Rows of a matrix whose rows lie further apart than their length (a
  // padded layout, linear.cpp's masked gradient) are added in the same order.
  const bool spaced_rows =
      x.dim() == 2 && p.reduced[0] && !p.reduced[1] && x.stride(1) == 1 && x.stride(0) >= x.size(1);
  if ((is_prefix_reduction(x, p) || spaced_rows) && outer > 1) {
    // x is [count, outer]: add rows.
    const T* px = x.data<T>();
    const std::int64_t rows = p.count, ld = spaced_rows ? x.stride(0) : outer;
    std::fill(po, po + outer, T(0));
    detail::parallel_for((outer + 63) / 64,
                         detail::loop_threads(x.numel() >= parallel_grain() && outer >= 64),
                         [&](std::int64_t blk) {
                           const std::int64_t c0 = blk * 64, c1 = std::min(outer, c0 + 64);
                           for (std::int64_t r = 0; r < rows; ++r) {
                             const T* row = px + r * ld;
#pragma omp simd
                             for (std::int64_t c = c0; c < c1; ++c) po[c] += row[c];
                           }
                         });
    return out;
  }
  Tensor rows = rows_view(x, p);
  const T* pr = rows.data<T>();
  std::int64_t inner = p.count;
  detail::parallel_for(outer, detail::loop_threads(x.numel() >= parallel_grain()),
                       [&](std::int64_t o) {
                         const T* row = pr + o * inner;
                         T s = 0;
#pragma omp simd reduction(+ : s)
                         for (std::int64_t i = 0; i < inner; ++i) s += row[i];
                         po[o] = s;
                       });
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  Plan p = make_plan(x, dims, keepdim, "sum");
  Tensor out = dispatch_float(x.dtype(), "sum", [&]<class T>() { return sum_kernel<T>(x, p); });
  out = out.detach().reshape(p.out_shape);
  Shape in_shape = x.shape(), keep = p.keep_shape;
  return record(out, "sum", {x}, [in_shape, keep](const Tensor& g, const Needs&) {
    return Grads{g.reshape(keep).expand(in_shape)};
  });
}

Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  Plan p = make_plan(x, dims, keepdim, "mean");
  ATTN_CHECK(p.count > 0, ValueError, "mean: cannot average over an empty dim of {}",
             shape_str(x.shape()));
  return div(sum(x, dims, keepdim), static_cast<double>(p.count));
}

namespace {
// Row-wise max with its (first) index.
template <class T>
std::pair<Tensor, Tensor> max_kernel(const Tensor& x, const Plan& p) {
  Tensor rows = rows_view(x, p);
  std::int64_t outer = rows.shape()[0], inner = rows.shape()[1];
  Tensor values = Tensor::empty(p.keep_shape, x.dtype());
  Tensor index = Tensor::empty(p.keep_shape, DType::i64);
  const T* pr = rows.data<T>();
  T* pv = values.data<T>();
  std::int64_t* pi = index.data<std::int64_t>();
  detail::parallel_for(outer, detail::loop_threads(x.numel() >= parallel_grain()),
                       [&](std::int64_t o) {
                         const T* row = pr + o * inner;
                         std::int64_t best = 0;
                         for (std::int64_t i = 1; i < inner; ++i)
                           if (row[i] > row[best] || (std::isnan(row[i]) && !std::isnan(row[best])))
                             best = i;
                         pv[o] = row[best];
                         pi[o] = best;
                       });
  return {values, index};
}
}  // namespace

Tensor max(const Tensor& x, std::int64_t dim, bool keepdim) {
  Plan p = make_plan(x, {dim}, keepdim, "max");
  ATTN_CHECK(p.count > 0, ValueError, "max: dim {} of {} is empty", dim, shape_str(x.shape()));
  auto [values, index] =
      dispatch_float(x.dtype(), "max", [&]<class T>() { return max_kernel<T>(x, p); });
  Tensor out = values.reshape(p.out_shape);
  std::int64_t d = normalize_dim(dim, x.dim(), "max");
  Shape in_shape = x.shape(), keep = p.keep_shape;
  Tensor idx = index;
  return record(out, "max", {x}, [in_shape, keep, idx, d](const Tensor& g, const Needs&) {
    // Scatter g into zeros at the argmax positions along d.
    Tensor gx = zeros(in_shape, g.dtype());
    Tensor gk = g.reshape(keep).contiguous();
    std::int64_t inner = 1;
    for (std::size_t k = d + 1; k < in_shape.size(); ++k) inner *= in_shape[k];
    std::int64_t n = in_shape[d], outer = shape_numel(keep) / std::max<std::int64_t>(inner, 1);
    const std::int64_t* pi = idx.data<std::int64_t>();
    dispatch_float(g.dtype(), "max", [&]<class T>() {
      T* pg = gx.data<T>();
      const T* pk = gk.data<T>();
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < inner; ++i)
          pg[(o * n + pi[o * inner + i]) * inner + i] = pk[o * inner + i];
    });
    return Grads{gx};
  });
}

Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim) {
  Plan p = make_plan(x, {dim}, keepdim, "argmax");
  ATTN_CHECK(p.count > 0, ValueError, "argmax: dim {} of {} is empty", dim, shape_str(x.shape()));
  Tensor index = dispatch_all(x.dtype(), "argmax", [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      return max_kernel<T>(x, p).second;
    } else {
      return max_kernel<double>(x.to(DType::f64), p).second;
    }
  });
  return index.reshape(p.out_shape);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  std::int64_t lead = x.dim() - static_cast<std::int64_t>(shape.size());
  ATTN_CHECK(lead >= 0, ShapeError, "sum_to: cannot reduce {} to {}", shape_str(x.shape()),
             shape_str(shape));
  std::vector<std::int64_t> dims;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else if (shape[d - lead] == 1 && x.shape()[d] != 1) {
      dims.push_back(d);
    } else {
      ATTN_CHECK(shape[d - lead] == x.shape()[d], ShapeError, "sum_to: cannot reduce {} to {}",
                 shape_str(x.shape()), shape_str(shape));
    }
  }
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, true).reshape(shape);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  ATTN_CHECK(a.defined() && b.defined(), ValueError, "max_abs_diff: got an undefined tensor");
  ATTN_CHECK(a.shape() == b.shape(), ShapeError,
             "max_abs_diff: the tensors must have one shape, got {} and {}", shape_str(a.shape()),
             shape_str(b.shape()));
  const std::vector<double> va = to_vector<double>(a), vb = to_vector<double>(b);
  double m = 0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    if (va[i] == vb[i]) continue;
    const double d = std::fabs(va[i] - vb[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::quiet_NaN();
    m = std::max(m, d);
  }
  return m;
}

}  // namespace attn
