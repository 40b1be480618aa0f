// Layer normalization over the last dim: forward kernel and backward rule.
//
//   mean = sum_j x_j / D,  var = sum_j (x_j - mean)^2 / D,  rstd = (var + eps)^-1/2
//   xhat = (x - mean) rstd,  y = xhat w + b
//
//   with gw = g w (g where there is no weight):
//   dx_j = rstd (gw_j - mean_k gw_k - xhat_j mean_k(gw_k xhat_k))
//   dw = sum_rows g xhat,  db = sum_rows g
//
// The forward saves the contiguous input and per-row mean and rstd (2 numbers
// per row), and the backward recomputes xhat from them. Variance is two-pass
// (sum of squared deviations), so a large common offset does not cancel.
// Rows run in parallel; dw and db are summed over rows in column blocks, so
// every thread owns its slice of the result (no atomics, no partial buffers).
#include "attn/ops/norm.h"

#include <algorithm>
#include <cmath>

#include "attn/autograd/node.h"
#include "attn/core/threads.h"

namespace attn {

using autograd::record;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

namespace {

constexpr std::int64_t kColBlock = 64;

template <class T>
void forward_rows(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, std::int64_t rows,
                  std::int64_t d, T eps) {
#pragma omp parallel for schedule(static) if (rows > 1 && rows * d >= kParallelGrain && fork_ok())
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t j = 0; j < d; ++j) s += xr[j];
    T mu = s / static_cast<T>(d);
    T ss = 0;
#pragma omp simd reduction(+ : ss)
    for (std::int64_t j = 0; j < d; ++j) ss += (xr[j] - mu) * (xr[j] - mu);
    T rs = T(1) / std::sqrt(ss / static_cast<T>(d) + eps);
    mean[r] = mu;
    rstd[r] = rs;
    if (w && b) {
#pragma omp simd
      for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mu) * rs * w[j] + b[j];
    } else if (w) {
#pragma omp simd
      for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mu) * rs * w[j];
    } else if (b) {
#pragma omp simd
      for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mu) * rs + b[j];
    } else {
#pragma omp simd
      for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mu) * rs;
    }
  }
}

template <class T>
void backward_input(const T* g, const T* x, const T* w, const T* mean, const T* rstd, T* dx,
                    std::int64_t rows, std::int64_t d) {
#pragma omp parallel for schedule(static) if (rows > 1 && rows * d >= kParallelGrain && fork_ok())
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* gr = g + r * d;
    const T* xr = x + r * d;
    T* o = dx + r * d;
    const T mu = mean[r], rs = rstd[r];
    T sum_gw = 0, sum_gwx = 0;
#pragma omp simd reduction(+ : sum_gw, sum_gwx)
    for (std::int64_t j = 0; j < d; ++j) {
      T gw = w ? gr[j] * w[j] : gr[j];
      sum_gw += gw;
      sum_gwx += gw * (xr[j] - mu) * rs;
    }
    const T a = sum_gw / static_cast<T>(d), c = sum_gwx / static_cast<T>(d);
#pragma omp simd
    for (std::int64_t j = 0; j < d; ++j) {
      T gw = w ? gr[j] * w[j] : gr[j];
      o[j] = rs * (gw - a - (xr[j] - mu) * rs * c);
    }
  }
}

// dw = sum_rows g xhat, db = sum_rows g (either pointer may be null).
template <class T>
void backward_params(const T* g, const T* x, const T* mean, const T* rstd, T* dw, T* db,
                     std::int64_t rows, std::int64_t d) {
#pragma omp parallel for schedule(static) if (d > kColBlock && rows * d >= kParallelGrain && \
                                              fork_ok())
  for (std::int64_t c0 = 0; c0 < d; c0 += kColBlock) {
    const std::int64_t c1 = std::min(d, c0 + kColBlock);
    if (dw) std::fill(dw + c0, dw + c1, T(0));
    if (db) std::fill(db + c0, db + c1, T(0));
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* gr = g + r * d;
      const T* xr = x + r * d;
      const T mu = mean[r], rs = rstd[r];
      if (dw) {
#pragma omp simd
        for (std::int64_t j = c0; j < c1; ++j) dw[j] += gr[j] * (xr[j] - mu) * rs;
      }
      if (db) {
#pragma omp simd
        for (std::int64_t j = c0; j < c1; ++j) db[j] += gr[j];
      }
    }
  }
}

void check_param(const Tensor& p, const Tensor& x, std::int64_t d, const char* name) {
  if (!p.defined()) return;
  ATTN_CHECK(p.shape() == Shape{d}, ShapeError,
             "layer_norm: {} must have shape [{}] for input {}, got {}", name, d,
             shape_str(x.shape()), shape_str(p.shape()));
  ATTN_CHECK(p.dtype() == x.dtype(), DTypeError, "layer_norm: {} is {} but the input is {}", name,
             dtype_name(p.dtype()), dtype_name(x.dtype()));
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  ATTN_CHECK(x.dim() >= 1, ShapeError,
             "layer_norm: expected an input (..., D), got a 0-dim tensor");
  ATTN_CHECK(eps >= 0, ValueError, "layer_norm: eps must be >= 0, got {}", eps);
  const std::int64_t d = x.size(-1);
  check_param(weight, x, d, "weight");
  check_param(bias, x, d, "bias");
  const std::int64_t rows = d == 0 ? 0 : x.numel() / d;

  Tensor xc = x.detach().contiguous();
  Tensor wc = weight.defined() ? weight.detach().contiguous() : Tensor();
  Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty({rows}, x.dtype());
  Tensor rstd = Tensor::empty({rows}, x.dtype());
  dispatch_float(x.dtype(), "layer_norm", [&]<class T>() {
    forward_rows<T>(xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr,
                    bc.defined() ? bc.data<T>() : nullptr, y.data<T>(), mean.data<T>(),
                    rstd.data<T>(), rows, d, static_cast<T>(eps));
  });

  return record(y, "layer_norm", {x, weight, bias},
                [xc, wc, mean, rstd, rows, d](const Tensor& g, const Needs& n) {
                  Tensor gc = g.contiguous();
                  Tensor dx, dw, db;
                  dispatch_float(xc.dtype(), "layer_norm", [&]<class T>() {
                    const T* pw = wc.defined() ? wc.data<T>() : nullptr;
                    if (n[0]) {
                      dx = Tensor::empty(xc.shape(), xc.dtype());
                      backward_input<T>(gc.data<T>(), xc.data<T>(), pw, mean.data<T>(),
                                        rstd.data<T>(), dx.data<T>(), rows, d);
                    }
                    if (n[1]) dw = Tensor::empty({d}, xc.dtype());
                    if (n[2]) db = Tensor::empty({d}, xc.dtype());
                    if (n[1] || n[2])
                      backward_params<T>(gc.data<T>(), xc.data<T>(), mean.data<T>(), rstd.data<T>(),
                                         n[1] ? dw.data<T>() : nullptr,
                                         n[2] ? db.data<T>() : nullptr, rows, d);
                  });
                  return Grads{dx, dw, db};
                });
}

}  // namespace attn
