// Elementwise ops: forward kernel and backward rule side by side.
//
//   add   d/da = 1,          d/db = 1
//   sub   d/da = 1,          d/db = -1
//   mul   d/da = b,          d/db = a
//   div   d/da = 1/b,        d/db = -a/b^2
//   exp   dy/dx = y          log   dy/dx = 1/x        sqrt  dy/dx = 1/(2y)
//   pow   dy/dx = p x^(p-1)  tanh  dy/dx = 1 - y^2    relu  dy/dx = [x > 0]
//   sigmoid dy/dx = y(1-y)   abs   dy/dx = sign(x)
//   sin   dy/dx = cos x      cos   dy/dx = -sin x
// Broadcast inputs get their gradient summed back to their shape (sum_to).
#include <cmath>

#include "attn/autograd/node.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "kernels/vec/vec_math.h"
#include "ops/loops.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;

namespace {

template <class F>
Tensor binary_float(const Tensor& a, const Tensor& b, const char* op, F f) {
  detail::check_same_dtype(a, b, op);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  return dispatch_float(a.dtype(), op, [&]<class T>() {
    return detail::binary_map<T>(a, b, shape, [f](T x, T y) { return static_cast<T>(f(x, y)); });
  });
}

template <class F>
Tensor unary_float(const Tensor& x, const char* op, F f) {
  return dispatch_float(x.dtype(), op, [&]<class T>() {
    return detail::unary_map<T>(x, [f](T v) { return static_cast<T>(f(v)); });
  });
}

Tensor scalar_like(const Tensor& t, double v) { return full({}, v, t.dtype()); }

}  // namespace

// ---- binary ----

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_float(a, b, "add", [](auto x, auto y) { return x + y; });
  Shape sa = a.shape(), sb = b.shape();
  return record(out, "add", {a, b}, [sa, sb](const Tensor& g, const Needs& n) {
    return Grads{n[0] ? sum_to(g, sa) : Tensor(), n[1] ? sum_to(g, sb) : Tensor()};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_float(a, b, "sub", [](auto x, auto y) { return x - y; });
  Shape sa = a.shape(), sb = b.shape();
  return record(out, "sub", {a, b}, [sa, sb](const Tensor& g, const Needs& n) {
    return Grads{n[0] ? sum_to(g, sa) : Tensor(), n[1] ? sum_to(neg(g), sb) : Tensor()};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_float(a, b, "mul", [](auto x, auto y) { return x * y; });
  Tensor ad = a.detach(), bd = b.detach();
  return record(out, "mul", {a, b}, [ad, bd](const Tensor& g, const Needs& n) {
    return Grads{n[0] ? sum_to(mul(g, bd), ad.shape()) : Tensor(),
                 n[1] ? sum_to(mul(g, ad), bd.shape()) : Tensor()};
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_float(a, b, "div", [](auto x, auto y) { return x / y; });
  Tensor ad = a.detach(), bd = b.detach();
  return record(out, "div", {a, b}, [ad, bd](const Tensor& g, const Needs& n) {
    Tensor ga, gb;
    if (n[0]) ga = sum_to(div(g, bd), ad.shape());
    if (n[1]) gb = sum_to(neg(div(mul(g, ad), mul(bd, bd))), bd.shape());
    return Grads{ga, gb};
  });
}

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }
Tensor rsub(double a, const Tensor& b) { return sub(scalar_like(b, a), b); }
Tensor rdiv(double a, const Tensor& b) { return div(scalar_like(b, a), b); }

// ---- unary ----

Tensor neg(const Tensor& x) {
  Tensor out = unary_float(x, "neg", [](auto v) { return -v; });
  return record(out, "neg", {x}, [](const Tensor& g, const Needs&) { return Grads{neg(g)}; });
}

Tensor exp(const Tensor& x) {
  Tensor out = unary_float(x, "exp", [](auto v) { return detail::exp_simd(v); });
  Tensor y = out.detach();
  return record(out, "exp", {x}, [y](const Tensor& g, const Needs&) { return Grads{mul(g, y)}; });
}

Tensor log(const Tensor& x) {
  Tensor out = unary_float(x, "log", [](auto v) { return std::log(v); });
  Tensor xd = x.detach();
  return record(out, "log", {x}, [xd](const Tensor& g, const Needs&) { return Grads{div(g, xd)}; });
}

Tensor sqrt(const Tensor& x) {
  Tensor out = unary_float(x, "sqrt", [](auto v) { return std::sqrt(v); });
  Tensor y = out.detach();
  return record(out, "sqrt", {x},
                [y](const Tensor& g, const Needs&) { return Grads{div(g, mul(y, 2.0))}; });
}

Tensor pow(const Tensor& x, double p) {
  Tensor out =
      unary_float(x, "pow", [p](auto v) { return std::pow(v, static_cast<decltype(v)>(p)); });
  Tensor xd = x.detach();
  return record(out, "pow", {x}, [xd, p](const Tensor& g, const Needs&) {
    return Grads{mul(g, mul(pow(xd, p - 1.0), p))};
  });
}

Tensor tanh(const Tensor& x) {
  Tensor out = unary_float(x, "tanh", [](auto v) { return detail::tanh_simd(v); });
  Tensor y = out.detach();
  return record(out, "tanh", {x}, [y](const Tensor& g, const Needs&) {
    Tensor d = dispatch_float(y.dtype(), "tanh", [&]<class T>() {
      return detail::binary_map<T>(g, y, y.shape(),
                                   [](T gv, T yv) { return gv * (T(1) - yv * yv); });
    });
    return Grads{d};
  });
}

Tensor relu(const Tensor& x) {
  Tensor out = unary_float(x, "relu", [](auto v) { return v > 0 ? v : decltype(v)(0); });
  Tensor xd = x.detach();
  return record(out, "relu", {x}, [xd](const Tensor& g, const Needs&) {
    Tensor d = dispatch_float(xd.dtype(), "relu", [&]<class T>() {
      return detail::binary_map<T>(g, xd, xd.shape(),
                                   [](T gv, T xv) { return xv > 0 ? gv : T(0); });
    });
    return Grads{d};
  });
}

Tensor sigmoid(const Tensor& x) {
  Tensor out = unary_float(x, "sigmoid", [](auto v) { return detail::sigmoid_simd(v); });
  Tensor y = out.detach();
  return record(out, "sigmoid", {x}, [y](const Tensor& g, const Needs&) {
    Tensor d = dispatch_float(y.dtype(), "sigmoid", [&]<class T>() {
      return detail::binary_map<T>(g, y, y.shape(),
                                   [](T gv, T yv) { return gv * yv * (T(1) - yv); });
    });
    return Grads{d};
  });
}

Tensor abs(const Tensor& x) {
  Tensor out = unary_float(x, "abs", [](auto v) { return std::abs(v); });
  Tensor xd = x.detach();
  return record(out, "abs", {x}, [xd](const Tensor& g, const Needs&) {
    Tensor d = dispatch_float(xd.dtype(), "abs", [&]<class T>() {
      return detail::binary_map<T>(g, xd, xd.shape(),
                                   [](T gv, T xv) { return xv > 0 ? gv : (xv < 0 ? -gv : T(0)); });
    });
    return Grads{d};
  });
}

Tensor sin(const Tensor& x) {
  Tensor out = unary_float(x, "sin", [](auto v) { return std::sin(v); });
  Tensor xd = x.detach();
  return record(out, "sin", {x},
                [xd](const Tensor& g, const Needs&) { return Grads{mul(g, cos(xd))}; });
}

Tensor cos(const Tensor& x) {
  Tensor out = unary_float(x, "cos", [](auto v) { return std::cos(v); });
  Tensor xd = x.detach();
  return record(out, "cos", {x},
                [xd](const Tensor& g, const Needs&) { return Grads{neg(mul(g, sin(xd)))}; });
}

// ---- comparisons and where (no gradient through the condition) ----

namespace {
template <class F>
Tensor compare(const Tensor& a, const Tensor& b, const char* op, F f) {
  detail::check_same_dtype(a, b, op);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  return dispatch_all(a.dtype(), op, [&]<class T>() {
    return detail::binary_map<T>(a, b, shape, [f](T x, T y) { return f(x, y) ? T(1) : T(0); });
  });
}
}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) {
  return compare(a, b, "eq", [](auto x, auto y) { return x == y; });
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compare(a, b, "ne", [](auto x, auto y) { return x != y; });
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compare(a, b, "lt", [](auto x, auto y) { return x < y; });
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compare(a, b, "le", [](auto x, auto y) { return x <= y; });
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return compare(a, b, "gt", [](auto x, auto y) { return x > y; });
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compare(a, b, "ge", [](auto x, auto y) { return x >= y; });
}
Tensor eq(const Tensor& a, double b) { return eq(a, full({}, b, a.dtype())); }
Tensor lt(const Tensor& a, double b) { return lt(a, full({}, b, a.dtype())); }
Tensor gt(const Tensor& a, double b) { return gt(a, full({}, b, a.dtype())); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  detail::check_same_dtype(a, b, "where");
  Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  // Read cond as 0/1 in a's dtype, broadcast to the full shape.
  Tensor c = ne(cond, zeros({}, cond.dtype())).to(a.dtype()).expand(shape);
  // Three-way select: out = c ? a : b.
  Tensor out = dispatch_all(a.dtype(), "where", [&]<class T>() {
    Tensor t = Tensor::empty(shape, a.dtype());
    T* po = t.data<T>();
    const T* pc = detail::base_ptr<T>(c);
    const T* pa = detail::base_ptr<T>(a);
    const T* pb = detail::base_ptr<T>(b);
    detail::for_each_row<4>(shape,
                            {t.strides(), c.strides(), detail::broadcast_strides(a, shape),
                             detail::broadcast_strides(b, shape)},
                            {0, c.offset(), a.offset(), b.offset()},
                            [&](const std::array<std::int64_t, 4>& off, std::int64_t n,
                                const std::array<std::int64_t, 4>& st) {
                              for (std::int64_t i = 0; i < n; ++i)
                                po[off[0] + i * st[0]] = pc[off[1] + i * st[1]] != T(0)
                                                             ? pa[off[2] + i * st[2]]
                                                             : pb[off[3] + i * st[3]];
                            });
    return t;
  });
  if (!is_floating(a.dtype())) return out;
  Tensor cd = c.detach();
  Shape sa = a.shape(), sb = b.shape();
  return record(out, "where", {a, b}, [cd, sa, sb](const Tensor& g, const Needs& n) {
    Tensor ga, gb;
    if (n[0]) ga = sum_to(mul(g, cd), sa);
    if (n[1]) gb = sum_to(mul(g, rsub(1.0, cd)), sb);
    return Grads{ga, gb};
  });
}

Tensor where(const Tensor& cond, const Tensor& a, double b) {
  return where(cond, a, full({}, b, a.dtype()));
}

bool has_nonfinite(const Tensor& x) {
  if (!is_floating(x.dtype())) return false;
  Tensor flags = dispatch_float(x.dtype(), "has_nonfinite", [&]<class T>() {
    return detail::unary_map<T>(x, [](T v) { return std::isfinite(v) ? T(0) : T(1); });
  });
  return sum(flags).item<double>() > 0;
}

}  // namespace attn
