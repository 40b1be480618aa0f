// src/ops/loops.h — internal: elementwise loops shared by the op families.
#pragma once

#include <array>

#include "attn/core/tensor.h"
#include "core/strided.h"

namespace attn::detail {

// Strides that read `t` as if it had the (broadcast) shape `shape`.
inline Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  std::size_t lead = shape.size() - t.shape().size();
  for (std::size_t i = 0; i < t.shape().size(); ++i)
    st[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return st;
}

template <class T>
const T* base_ptr(const Tensor& t) {
  return static_cast<const T*>(t.storage()->data());
}

// out[i] = f(x[i]) into a new contiguous tensor of x's shape and dtype Out.
template <class T, class Out = T, class F>
Tensor unary_map(const Tensor& x, F f) {
  Tensor out = Tensor::empty(x.shape(), dtype_v<Out>);
  Out* po = out.data<Out>();
  const T* px = base_ptr<T>(x);
  for_each_row<2>(x.shape(), {out.strides(), x.strides()}, {0, x.offset()},
                  [&](const std::array<std::int64_t, 2>& off, std::int64_t n,
                      const std::array<std::int64_t, 2>& st) {
                    Out* o = po + off[0];
                    const T* a = px + off[1];
                    if (st[1] == 1) {
#pragma omp simd
                      for (std::int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
                    } else {
                      for (std::int64_t i = 0; i < n; ++i) o[i * st[0]] = f(a[i * st[1]]);
                    }
                  });
  return out;
}

// out[i] = f(a[i], b[i]) with broadcasting, into a new contiguous tensor.
template <class T, class Out = T, class F>
Tensor binary_map(const Tensor& a, const Tensor& b, const Shape& shape, F f) {
  Tensor out = Tensor::empty(shape, dtype_v<Out>);
  Out* po = out.data<Out>();
  const T* pa = base_ptr<T>(a);
  const T* pb = base_ptr<T>(b);
  for_each_row<3>(shape, {out.strides(), broadcast_strides(a, shape), broadcast_strides(b, shape)},
                  {0, a.offset(), b.offset()},
                  [&](const std::array<std::int64_t, 3>& off, std::int64_t n,
                      const std::array<std::int64_t, 3>& st) {
                    Out* o = po + off[0];
                    const T* x = pa + off[1];
                    const T* y = pb + off[2];
                    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
#pragma omp simd
                      for (std::int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
                    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
                      const T yv = y[0];
#pragma omp simd
                      for (std::int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
                    } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
                      const T xv = x[0];
#pragma omp simd
                      for (std::int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
                    } else {
                      for (std::int64_t i = 0; i < n; ++i)
                        o[i * st[0]] = f(x[i * st[1]], y[i * st[2]]);
                    }
                  });
  return out;
}

inline void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  ATTN_CHECK(a.dtype() == b.dtype(), DTypeError, "{}: dtypes differ: {} and {}", op,
             dtype_name(a.dtype()), dtype_name(b.dtype()));
}

}  // namespace attn::detail
