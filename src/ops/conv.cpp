// One-dimensional convolution along the tokens: forward kernel and backward rule.
//
//   Y[b, t, o] = bias[o] + sum_{j, c} weight[o, c, j] X[b, t + j - p, c],  p = (k - 1) / 2
//
// im2col: U (B n, k d_in), U[b n + t, j d_in + c] = X[b, t + j - p, c] (0 outside
// the sequence), and W (d_out, k d_in), W[o, j d_in + c] = weight[o, c, j]
// (weight permuted to (d_out, k, d_in)). Then
//   Y = U W^T + bias                              one product, linear()'s
//   dU = g W,  dX[b, s, c] = sum_j dU[b n + s - j + p, j d_in + c]   (col2im)
//   dW = g^T U,  dweight = dW read as (d_out, k, d_in), permuted back
//   dbias = sum over rows of g
// The forward keeps X and W, not U (k times X): the backward unfolds X again
// when the weight wants a gradient. col2im gathers per output row, so rows
// run in parallel without atomics.
#include "attn/ops/conv.h"

#include <algorithm>
#include <cstring>

#include "attn/autograd/node.h"
#include "attn/core/threads.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"
#include "core/parallel.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;

namespace {

struct ConvShape {
  std::int64_t B, n, d_in, d_out, k, pad;  // pad: zeros on the left
};

ConvShape check(const Tensor& X, const Tensor& weight, const Tensor& bias, const char* op) {
  ATTN_CHECK(X.defined() && weight.defined(), ValueError, "{}: undefined operand", op);
  ATTN_CHECK(X.dim() == 3, ShapeError, "{}: expected an input (B, n, d_in), got {}", op,
             shape_str(X.shape()));
  ATTN_CHECK(weight.dim() == 3 && weight.size(0) > 0 && weight.size(2) > 0, ShapeError,
             "{}: expected a weight (d_out, d_in, k) with d_out, k >= 1, got {}", op,
             shape_str(weight.shape()));
  ATTN_CHECK(weight.size(1) == X.size(2) && X.size(2) > 0, ShapeError,
             "{}: the weight {} expects d_in = {} channels, the input {} has {}", op,
             shape_str(weight.shape()), weight.size(1), shape_str(X.shape()), X.size(2));
  ATTN_CHECK(!bias.defined() || bias.shape() == Shape{weight.size(0)}, ShapeError,
             "{}: expected a bias ({}) for weight {}, got {}", op, weight.size(0),
             shape_str(weight.shape()), bias.defined() ? shape_str(bias.shape()) : "");
  ATTN_CHECK(weight.dtype() == X.dtype() && (!bias.defined() || bias.dtype() == X.dtype()),
             DTypeError, "{}: input, weight and bias must share a dtype, got {}, {} and {}", op,
             dtype_name(X.dtype()), dtype_name(weight.dtype()),
             bias.defined() ? dtype_name(bias.dtype()) : "none");
  dispatch_float(X.dtype(), op, []<class T>() {});
  const std::int64_t k = weight.size(2);
  return {X.size(0), X.size(1), X.size(2), weight.size(0), k, (k - 1) / 2};
}

// f(r, b, t) for each row r = b n + t of the unfolded matrix (k d_in wide),
// over the threads where the matrix is large.
template <class F>
void for_each_row(const ConvShape& s, F&& f) {
  const std::int64_t rows = s.B * s.n;
  detail::parallel_for(rows, detail::loop_threads(rows * s.k * s.d_in >= parallel_grain()),
                       [&](std::int64_t r) { f(r, r / s.n, r % s.n); });
}

// U[b n + t, j d_in + c] = X[b, t + j - pad, c], zero outside the sequence. X contiguous.
template <class T>
void im2col(const T* x, T* u, const ConvShape& s) {
  for_each_row(s, [&](std::int64_t r, std::int64_t b, std::int64_t t) {
    T* ur = u + r * s.k * s.d_in;
    for (std::int64_t j = 0; j < s.k; ++j) {
      const std::int64_t src = t + j - s.pad;
      T* dst = ur + j * s.d_in;
      if (src < 0 || src >= s.n)
        std::fill(dst, dst + s.d_in, T(0));
      else
        std::memcpy(dst, x + (b * s.n + src) * s.d_in, sizeof(T) * s.d_in);
    }
  });
}

// dX[b, src, c] = sum_j dU[b n + src - j + pad, j d_in + c]: each input row
// gathers from the (at most k) output rows that read it.
template <class T>
void col2im(const T* du, T* dx, const ConvShape& s) {
  const std::int64_t width = s.k * s.d_in;
  for_each_row(s, [&](std::int64_t r, std::int64_t b, std::int64_t src) {
    T* o = dx + r * s.d_in;
    std::fill(o, o + s.d_in, T(0));
    for (std::int64_t j = 0; j < s.k; ++j) {
      const std::int64_t t = src - j + s.pad;
      if (t < 0 || t >= s.n) continue;
      const T* g = du + (b * s.n + t) * width + j * s.d_in;
#pragma omp simd
      for (std::int64_t c = 0; c < s.d_in; ++c) o[c] += g[c];
    }
  });
}

Tensor unfold(const Tensor& xc, const ConvShape& s) {
  Tensor u = Tensor::empty({s.B * s.n, s.k * s.d_in}, xc.dtype());
  dispatch_float(xc.dtype(), "conv1d", [&]<class T>() { im2col<T>(xc.data<T>(), u.data<T>(), s); });
  return u;
}

}  // namespace

Tensor conv1d(const Tensor& X, const Tensor& weight, const Tensor& bias) {
  const ConvShape s = check(X, weight, bias, "conv1d");
  Tensor xc = X.detach().contiguous();
  // W (d_out, k d_in): weight[o, c, j] at column j d_in + c.
  Tensor W = weight.detach().permute({0, 2, 1}).contiguous().view({s.d_out, s.k * s.d_in});
  Tensor bc = bias.defined() ? bias.detach() : Tensor();
  Tensor y;
  if (s.B * s.n == 0) {
    y = zeros({s.B, s.n, s.d_out}, X.dtype());
  } else {
    autograd::NoGradGuard no_grad;
    y = linear(unfold(xc, s), W, bc).view({s.B, s.n, s.d_out});
  }
  return record(y, "conv1d", {X, weight, bias}, [xc, W, s](const Tensor& g, const Needs& n) {
    Grads grads(3);
    const DType dt = xc.dtype();
    if (s.B * s.n == 0) {
      if (n[0]) grads[0] = zeros(xc.shape(), dt);
      if (n[1]) grads[1] = zeros({s.d_out, s.d_in, s.k}, dt);
      if (n[2]) grads[2] = zeros({s.d_out}, dt);
      return grads;
    }
    Tensor g2 = g.reshape({s.B * s.n, s.d_out});
    if (n[0]) {
      Tensor du = matmul(g2, W).contiguous();
      Tensor dx = Tensor::empty(xc.shape(), dt);
      dispatch_float(dt, "conv1d", [&]<class T>() { col2im<T>(du.data<T>(), dx.data<T>(), s); });
      grads[0] = dx;
    }
    if (n[1])
      grads[1] = matmul(g2.transpose(0, 1), unfold(xc, s))
                     .view({s.d_out, s.k, s.d_in})
                     .permute({0, 2, 1})
                     .contiguous();
    if (n[2]) grads[2] = sum(g2, {0});
    return grads;
  });
}

Tensor conv1d_reference(const Tensor& X, const Tensor& weight, const Tensor& bias) {
  const ConvShape s = check(X, weight, bias, "conv1d_reference");
  Tensor xc = X.contiguous(), wc = weight.contiguous();
  Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  Tensor y = Tensor::empty({s.B, s.n, s.d_out}, X.dtype());
  dispatch_float(X.dtype(), "conv1d_reference", [&]<class T>() {
    const T* x = xc.data<T>();
    const T* w = wc.data<T>();
    T* out = y.data<T>();
    for (std::int64_t b = 0; b < s.B; ++b)
      for (std::int64_t t = 0; t < s.n; ++t)
        for (std::int64_t o = 0; o < s.d_out; ++o) {
          double acc = bc.defined() ? static_cast<double>(bc.data<T>()[o]) : 0.0;
          for (std::int64_t j = 0; j < s.k; ++j) {
            const std::int64_t src = t + j - s.pad;
            if (src < 0 || src >= s.n) continue;
            for (std::int64_t c = 0; c < s.d_in; ++c)
              acc += static_cast<double>(w[(o * s.d_in + c) * s.k + j]) *
                     static_cast<double>(x[(b * s.n + src) * s.d_in + c]);
          }
          out[(b * s.n + t) * s.d_out + o] = static_cast<T>(acc);
        }
  });
  return y;
}

}  // namespace attn
