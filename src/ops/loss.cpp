// Softmax cross-entropy: forward kernel and backward rule.
//
//   m_n = max_c x_nc,  ls_n = log sum_c exp(x_nc - m_n)
//   nll_n  = ls_n - (x_n,label_n - m_n)              (= -log_softmax(x)_n,label_n)
//   loss_n = nll_n                                   (label smoothing eps = 0)
//   dx_nc  = g_n (exp((x_nc - m_n) - ls_n) - [c == label_n])
//
// With label smoothing eps (Szegedy et al. 2016, arXiv 1512.00567) the target
// is (1 - eps) onehot(label) + eps / C:
//   loss_n = (1 - eps) nll_n + eps (ls_n - (mean_c x_nc - m_n))
//   dx_nc  = g_n (exp((x_nc - m_n) - ls_n) - (1 - eps) [c == label_n] - eps / C)
//
// The forward saves the contiguous logits and (m, ls) per position, and the
// backward recomputes the softmax from them (no (N, C) probabilities kept).
// m and ls stay apart so that a large m does not round ls away in f32.
// Position weights and the reduction are ordinary differentiable ops applied
// to the per-position loss, so their gradients come from mul/sum/mean.
#include "attn/ops/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attn/autograd/node.h"
#include "attn/core/threads.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "core/parallel.h"
#include "kernels/vec/vec_math.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;

namespace {

// The sum of exp(x_j - m) over a row of c, in an order written out (the one
// GCC 12 chose when it vectorized the plain loop for AVX-512 f32): 16
// partial sums, p[l] adding elements l, l + 16, ... below the last multiple
// of 16 in turn, the remaining elements' added to p[0] in turn; the caller
// then adds 0 + p[0] + p[1] + ... + p[15].
constexpr int kPartials = 16;

template <class T>
inline void exp_partials(const T* xr, std::int64_t c, T m, T (&p)[kPartials]) {
  for (int l = 0; l < kPartials; ++l) p[l] = 0;
  std::int64_t j = 0;
  for (; j + kPartials <= c; j += kPartials)
#pragma omp simd
    for (int l = 0; l < kPartials; ++l) p[l] += detail::exp_simd<T>(xr[j + l] - m);
  for (; j < c; ++j) p[0] += detail::exp_simd<T>(xr[j] - m);
}

// Rows go in blocks of kBlockRows: each row's max and partial sums, then the
// partials of the block's rows added side by side (16 independent chains
// rather than one row's 16 dependent additions after another's).
constexpr std::int64_t kBlockRows = 16;

template <class T>
void forward_rows(const T* x, const std::int64_t* labels, T* loss, T* nll, T* mx, T* ls,
                  std::int64_t rows, std::int64_t c, T eps) {
  const std::int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  detail::parallel_for(
      blocks, detail::loop_threads(blocks > 1 && rows * c >= parallel_grain()),
      [&](std::int64_t blk) {
        const std::int64_t r0 = blk * kBlockRows, n = std::min(kBlockRows, rows - r0);
        T p[kBlockRows][kPartials], s[kBlockRows];
        for (std::int64_t i = 0; i < n; ++i) {
          const T* xr = x + (r0 + i) * c;
          T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
          for (std::int64_t j = 0; j < c; ++j) m = xr[j] > m ? xr[j] : m;
          mx[r0 + i] = m;
          exp_partials(xr, c, m, p[i]);
          s[i] = 0;
        }
        for (int l = 0; l < kPartials; ++l)
          for (std::int64_t i = 0; i < n; ++i) s[i] += p[i][l];
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int64_t r = r0 + i;
          const T* xr = x + r * c;
          const T m = mx[r];
          ls[r] = std::log(s[i]);
          const T nll_r = ls[r] - (xr[labels[r]] - m);
          if (nll) nll[r] = nll_r;
          if (eps == T(0)) {
            loss[r] = nll_r;
          } else {
            T sum_x = 0;
#pragma omp simd reduction(+ : sum_x)
            for (std::int64_t j = 0; j < c; ++j) sum_x += xr[j];
            loss[r] = (T(1) - eps) * nll_r + eps * (ls[r] - (sum_x / static_cast<T>(c) - m));
          }
        }
      });
}

// o = g exp((x - m) - ls) over one row.
template <class T>
void scaled_exp_shifted(const T* x, T* o, std::int64_t c, T g, T m, T ls) {
#pragma omp simd
  for (std::int64_t j = 0; j < c; ++j) o[j] = g * detail::exp_simd<T>((x[j] - m) - ls);
}

template <class T>
void backward_rows(const T* g, const T* x, const std::int64_t* labels, const T* mx, const T* ls,
                   T* dx, std::int64_t rows, std::int64_t c, T eps) {
  detail::parallel_for(rows, detail::loop_threads(rows > 1 && rows * c >= parallel_grain()),
                       [&](std::int64_t r) {
                         const T* xr = x + r * c;
                         T* o = dx + r * c;
                         scaled_exp_shifted(xr, o, c, g[r], mx[r], ls[r]);
                         if (eps == T(0)) {
                           o[labels[r]] -= g[r];
                         } else {
                           const T uniform = g[r] * eps / static_cast<T>(c);
#pragma omp simd
                           for (std::int64_t j = 0; j < c; ++j) o[j] -= uniform;
                           o[labels[r]] -= g[r] * (T(1) - eps);
                         }
                       });
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor& weights,
                     Reduction reduction, double label_smoothing, Tensor* nll) {
  ATTN_CHECK(label_smoothing >= 0 && label_smoothing < 1, ValueError,
             "cross_entropy: label_smoothing must be in [0, 1), got {}", label_smoothing);
  ATTN_CHECK(logits.dim() >= 1, ShapeError,
             "cross_entropy: expected logits (..., C), got a 0-dim tensor");
  ATTN_CHECK(is_floating(logits.dtype()), DTypeError,
             "cross_entropy: logits must be f32 or f64, got {}", dtype_name(logits.dtype()));
  ATTN_CHECK(labels.dtype() == DType::i32 || labels.dtype() == DType::i64, DTypeError,
             "cross_entropy: labels must be i32 or i64, got {}", dtype_name(labels.dtype()));
  const Shape pos_shape(logits.shape().begin(), logits.shape().end() - 1);
  ATTN_CHECK(labels.shape() == pos_shape, ShapeError,
             "cross_entropy: labels must have shape {} for logits {}, got {}", shape_str(pos_shape),
             shape_str(logits.shape()), shape_str(labels.shape()));
  if (weights.defined()) {
    ATTN_CHECK(weights.dtype() == logits.dtype(), DTypeError,
               "cross_entropy: weights are {} but logits are {}", dtype_name(weights.dtype()),
               dtype_name(logits.dtype()));
    ATTN_CHECK(broadcast_shapes(pos_shape, weights.shape(), "cross_entropy") == pos_shape,
               ShapeError, "cross_entropy: weights {} do not broadcast to the labels' shape {}",
               shape_str(weights.shape()), shape_str(pos_shape));
  }
  const std::int64_t c = logits.size(-1);
  const std::int64_t rows = labels.numel();

  Tensor lab = labels.to(DType::i64).contiguous();
  const std::int64_t* pl = lab.data<std::int64_t>();
  for (std::int64_t r = 0; r < rows; ++r)
    ATTN_CHECK(pl[r] >= 0 && pl[r] < c, ValueError,
               "cross_entropy: label {} at position {} is out of range [0, {}) for {} classes",
               pl[r], r, c, c);

  Tensor xc = logits.detach().contiguous();
  Tensor loss = Tensor::empty(pos_shape, logits.dtype());
  Tensor mx = Tensor::empty({rows}, logits.dtype());
  Tensor ls = Tensor::empty({rows}, logits.dtype());
  if (nll) *nll = Tensor::empty(pos_shape, logits.dtype());
  const double eps = label_smoothing;
  dispatch_float(logits.dtype(), "cross_entropy", [&]<class T>() {
    forward_rows<T>(xc.data<T>(), pl, loss.data<T>(), nll ? nll->data<T>() : nullptr, mx.data<T>(),
                    ls.data<T>(), rows, c, static_cast<T>(eps));
  });
  loss = record(loss, "cross_entropy", {logits},
                [xc, lab, mx, ls, rows, c, eps](const Tensor& g, const Needs&) {
                  Tensor gc = g.contiguous();
                  Tensor dx = Tensor::empty(xc.shape(), xc.dtype());
                  dispatch_float(xc.dtype(), "cross_entropy", [&]<class T>() {
                    backward_rows<T>(gc.data<T>(), xc.data<T>(), lab.data<std::int64_t>(),
                                     mx.data<T>(), ls.data<T>(), dx.data<T>(), rows, c,
                                     static_cast<T>(eps));
                  });
                  return Grads{dx};
                });

  if (weights.defined()) loss = mul(loss, weights);
  switch (reduction) {
    case Reduction::none: return loss;
    case Reduction::sum: return sum(loss);
    case Reduction::mean: return mean(loss);
  }
  throw ValueError("cross_entropy: unknown reduction");
}

}  // namespace attn
