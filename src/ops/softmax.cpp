// Softmax and log-softmax over the last dim: forward kernel and backward rule.
//
//   softmax      y_j = exp(x_j - m) / s,  s = sum_k exp(x_k - m),  m = max_k x_k
//                dx_j = y_j (g_j - sum_k g_k y_k)
//   log_softmax  y_j = x_j - m - log s
//                dx_j = g_j - exp(y_j) sum_k g_k
//
// Fast kernel: the input is made contiguous once and viewed as (rows, D); each
// row is three vectorized passes (max; exp and sum, written into y; scale),
// rows split over OpenMP threads when the tensor is large. The backward saves
// only y (detached) and is one more pass of the same kind. softmax and the
// length-masked softmax (d2l's masked_softmax) share one kernel: plain softmax
// is every row at its full length.
#include "attn/ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attn/autograd/node.h"
#include "attn/core/threads.h"
#include "attn/ops/attention.h"
#include "core/parallel.h"
#include "kernels/vec/vec_math.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;

namespace {

// The row length of x seen as (rows, D); a 0-dim tensor is one row of one.
std::int64_t row_len(const Tensor& x) { return x.dim() == 0 ? 1 : x.size(-1); }

template <class T>
T row_max(const T* x, std::int64_t d) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (std::int64_t i = 0; i < d; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// y = exp(x - m) over one row; returns the sum of y.
template <class T>
T exp_shifted(const T* x, T* y, std::int64_t d, T m) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t i = 0; i < d; ++i) {
    T e = detail::exp_simd<T>(x[i] - m);
    y[i] = e;
    s += e;
  }
  return s;
}

// sum over one row of exp(x - m), nothing stored.
template <class T>
T sum_exp_shifted(const T* x, std::int64_t d, T m) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t i = 0; i < d; ++i) s += detail::exp_simd<T>(x[i] - m);
  return s;
}

// Row lengths for the masked kernels: all d, or one per row from an array.
inline auto full_rows(std::int64_t d) {
  return [d](std::int64_t) { return d; };
}
inline auto row_lengths(const std::int64_t* len) {
  return [len](std::int64_t r) { return len[r]; };
}

// Runs f(row) for every row, in parallel when the work is large.
template <class F>
void for_rows(std::int64_t rows, std::int64_t d, F f) {
  detail::parallel_for(rows, detail::loop_threads(rows > 1 && rows * d >= parallel_grain()),
                       [&](std::int64_t r) { f(r); });
}

template <class T>
void log_softmax_rows(const T* x, T* y, std::int64_t rows, std::int64_t d) {
  for_rows(rows, d, [&](std::int64_t r) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    T m = row_max(xr, d);
    // (x - m) - log s, not x - (m + log s): with m = -1e6 (a masked row) the
    // sum m + log s would round away log s in f32.
    T ls = std::log(sum_exp_shifted(xr, d, m));
#pragma omp simd
    for (std::int64_t i = 0; i < d; ++i) yr[i] = (xr[i] - m) - ls;
  });
}

// dx = g - exp(y) * sum(g)
template <class T>
void log_softmax_backward_rows(const T* g, const T* y, T* dx, std::int64_t rows, std::int64_t d) {
  for_rows(rows, d, [&](std::int64_t r) {
    const T* gr = g + r * d;
    const T* yr = y + r * d;
    T* o = dx + r * d;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = 0; i < d; ++i) s += gr[i];
#pragma omp simd
    for (std::int64_t i = 0; i < d; ++i) o[i] = gr[i] - detail::exp_simd<T>(yr[i]) * s;
  });
}

// Row r sees its first len(r) entries: softmax over them, 0 after; a row of
// length 0 is uniform (all its entries were masked to one value). Plain
// softmax is the case len(r) = d.
template <class T, class Len>
void masked_softmax_rows(const T* x, T* y, Len len, std::int64_t rows, std::int64_t d) {
  for_rows(rows, d, [&](std::int64_t r) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    const std::int64_t n = len(r);
    if (n == 0) {
      std::fill(yr, yr + d, T(1) / static_cast<T>(d));
      return;
    }
    T m = row_max(xr, n);
    T inv = T(1) / exp_shifted(xr, yr, n, m);
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) yr[i] *= inv;
    std::fill(yr + n, yr + d, T(0));
  });
}

// dx = y * (g - sum(g * y)) over the first len(r) entries, 0 after.
template <class T, class Len>
void masked_softmax_backward_rows(const T* g, const T* y, T* dx, Len len, std::int64_t rows,
                                  std::int64_t d) {
  for_rows(rows, d, [&](std::int64_t r) {
    const T* gr = g + r * d;
    const T* yr = y + r * d;
    T* o = dx + r * d;
    const std::int64_t n = len(r);
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (std::int64_t i = 0; i < n; ++i) dot += gr[i] * yr[i];
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) o[i] = yr[i] * (gr[i] - dot);
    std::fill(o + n, o + d, T(0));
  });
}

enum class Kind { softmax, log_softmax };

Tensor forward(const Tensor& x, Kind kind, const char* op) {
  return dispatch_float(x.dtype(), op, [&]<class T>() {
    Tensor xc = x.detach().contiguous();
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    std::int64_t d = row_len(x);
    std::int64_t rows = d == 0 ? 0 : x.numel() / d;
    if (kind == Kind::softmax)
      masked_softmax_rows<T>(xc.data<T>(), y.data<T>(), full_rows(d), rows, d);
    else
      log_softmax_rows<T>(xc.data<T>(), y.data<T>(), rows, d);
    return y;
  });
}

Tensor backward(const Tensor& g, const Tensor& y, Kind kind, const char* op) {
  return dispatch_float(y.dtype(), op, [&]<class T>() {
    Tensor gc = g.contiguous();
    Tensor dx = Tensor::empty(y.shape(), y.dtype());
    std::int64_t d = row_len(y);
    std::int64_t rows = d == 0 ? 0 : y.numel() / d;
    if (kind == Kind::softmax)
      masked_softmax_backward_rows<T>(gc.data<T>(), y.data<T>(), dx.data<T>(), full_rows(d), rows,
                                      d);
    else
      log_softmax_backward_rows<T>(gc.data<T>(), y.data<T>(), dx.data<T>(), rows, d);
    return dx;
  });
}

// The reference: one plain scalar loop per row over any layout, std::exp.
Tensor reference(const Tensor& x, Kind kind, const char* op) {
  return dispatch_float(x.dtype(), op, [&]<class T>() {
    Tensor xc = x.detach().contiguous();
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    std::int64_t d = row_len(x);
    std::int64_t rows = d == 0 ? 0 : x.numel() / d;
    const T* px = xc.data<T>();
    T* py = y.data<T>();
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xr = px + r * d;
      T* yr = py + r * d;
      T m = xr[0];
      for (std::int64_t i = 1; i < d; ++i) m = std::max(m, xr[i]);
      T s = 0;
      for (std::int64_t i = 0; i < d; ++i) s += std::exp(xr[i] - m);
      for (std::int64_t i = 0; i < d; ++i)
        yr[i] = kind == Kind::softmax ? std::exp(xr[i] - m) / s : xr[i] - m - std::log(s);
    }
    return y;
  });
}

}  // namespace

Tensor softmax(const Tensor& x) {
  Tensor y = forward(x, Kind::softmax, "softmax");
  Tensor yd = y.detach();
  return record(y, "softmax", {x}, [yd](const Tensor& g, const Needs&) {
    return Grads{backward(g, yd, Kind::softmax, "softmax")};
  });
}

Tensor log_softmax(const Tensor& x) {
  Tensor y = forward(x, Kind::log_softmax, "log_softmax");
  Tensor yd = y.detach();
  return record(y, "log_softmax", {x}, [yd](const Tensor& g, const Needs&) {
    return Grads{backward(g, yd, Kind::log_softmax, "log_softmax")};
  });
}

Tensor softmax_reference(const Tensor& x) {
  return reference(x, Kind::softmax, "softmax_reference");
}

Tensor log_softmax_reference(const Tensor& x) {
  return reference(x, Kind::log_softmax, "log_softmax_reference");
}

Tensor masked_softmax_lengths(const Tensor& x, const Tensor& lengths) {
  const char* op = "masked_softmax";
  ATTN_CHECK(x.dim() >= 1, ShapeError, "{}: expected scores (..., K), got a 0-dim tensor", op);
  Shape rows_shape(x.shape().begin(), x.shape().end() - 1);
  ATTN_CHECK(lengths.shape() == rows_shape, ShapeError,
             "{}: lengths must have shape {} (one per row of scores {}), got {}", op,
             shape_str(rows_shape), shape_str(x.shape()), shape_str(lengths.shape()));
  const std::int64_t d = x.size(-1), rows = shape_numel(rows_shape);
  // attention's valid-lengths rule (checked, fractional lengths ceiled), one
  // length per row: (rows, 1).
  Tensor len = attention_limits(lengths.detach().reshape({rows}), false, rows, 1, d, op);
  const std::int64_t* pl = len.data<std::int64_t>();
  Tensor y = dispatch_float(x.dtype(), op, [&]<class T>() {
    Tensor xc = x.detach().contiguous();
    Tensor out = Tensor::empty(x.shape(), x.dtype());
    masked_softmax_rows<T>(xc.data<T>(), out.data<T>(), row_lengths(pl), rows, d);
    return out;
  });
  Tensor yd = y.detach();
  return record(y, op, {x}, [yd, len, rows, d](const Tensor& g, const Needs&) {
    Tensor dx = dispatch_float(yd.dtype(), "masked_softmax", [&]<class T>() {
      Tensor gc = g.contiguous();
      Tensor out = Tensor::empty(yd.shape(), yd.dtype());
      masked_softmax_backward_rows<T>(gc.data<T>(), yd.data<T>(), out.data<T>(),
                                      row_lengths(len.data<std::int64_t>()), rows, d);
      return out;
    });
    return Grads{dx};
  });
}

}  // namespace attn
