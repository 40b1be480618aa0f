// linear_argmax (attn/ops/matmul.h): the position of the largest element of
// each row of y = x @ W^T + b, the same position argmax(linear(x, W, b))
// gives, and the int8 screen that finds it without most of the product.
//
// Greedy decoding needs only the argmax of each row of the output layer's
// logits, and that layer is the largest product of a decoding step (a
// subword model's 8,000 words: 43% of the tatoeba model's multiply-adds).
// Where linear() would run attn's f32 kernel (kernels/gemm/f32_gemm.h), the screen:
//
//   1. y'  = the int8 product of x and W (ops/quantize.h's formulas, on
//      AVX-512 VNNI: 4 multiply-adds for each f32 one, or AVX2: 2; W a
//      quarter the bytes);
//   2. E_n = a bound on |y'_n - y_n|, y_n the f32 kernel's own result
//      (below), from norms of x's row and of W's rows;
//   3. L   = max_n (y'_n - E_n), at most the largest y_n;
//   4. the candidates, the n with y'_n + E_n >= L, computed exactly as the
//      f32 kernel computes them (one FMA per term from 0, k in order, then
//      the bias: kernels/gemm/f32_gemm.h), and the first largest taken.
//
// Every n outside the candidates has y_n <= y'_n + E_n < L <= max y, so the
// answer is the one argmax(linear(x, W, b)) gives, bit for bit, ties to the
// first position included. A row whose bound is not finite (an infinity or a
// NaN in x or y') is computed in full.
//
// The bound. With x^ = sx xq and W^_n = sw_n Wq_n the quantized operands as
// the int8 kernel used them (real numbers), s_n = x . W_n exactly, u = 2^-24
// and gamma_K = K u / (1 - K u), by Cauchy-Schwarz and the rounding of each
// operation:
//   the int8 rounding:   |s_n - x^ . W^_n| <= ||x - x^|| ||W_n|| + ||x^|| ||W_n - W^_n||
//   the int8 path's own: |y'_n - (x^ . W^_n + b_n)| <= 5u (||x^|| ||W^_n|| + |b_n|)
//                        (int to float, the product sx sw_n, the FMA with the bias)
//   the f32 kernel's:    |y_n - (s_n + b_n)| <= (gamma_K + 2u) (||x|| ||W_n|| + |b_n|)
//                        (the FMA chain, then + b_n)
// E_n is their sum with gamma_K + 8u for both rounding terms, times 1.01,
// plus 2^-20 |y'_n| and 1e-30 for the rounding of E_n and y'_n -+ E_n
// themselves and for underflow. ||W_n|| and ||W_n - W^_n|| are computed once
// per weight in f64 and rounded up to floats (upward, subnormals too); a
// weight whose norms do not fit a float gets no screen. The chain's analysis
// holds while no partial sum overflows: a row whose ||x|| max_n ||W_n|| +
// max_n |b_n| could reach half the largest float is computed in full, as are
// rows where an E_n or a y'_n is not a finite number.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/core/env.h"
#include "attn/core/error.h"
#include "attn/core/threads.h"
#include "attn/ops/matmul.h"
#include "attn/ops/quantize.h"
#include "core/parallel.h"
#include "kernels/quantize/quantize_rows.h"
#include "kernels/row_stats/row_stats.h"
#include "ops/matmul_internal.h"
#include "ops/precision_internal.h"
#include "ops/quantize_internal.h"

namespace attn {

namespace detail {

struct ArgmaxScreen {
  std::unique_ptr<QuantizedWeight> q;  // W in int8; null: no screen (W or its norms not finite)
  std::vector<float> wnorm, dnorm;  // ||W_n||, ||W_n - W^_n||, rounded up
  double wmax = 0;  // max_n ||W_n||
};

}  // namespace detail

namespace {

using detail::ArgmaxScreen;

// Output layers of fewer rows (d2l's word models: about 200 words) take the
// plain path: there the screen's passes cost about what they save.
constexpr std::int64_t kMinScreenN = 1024;

std::atomic<std::int64_t> g_rows{0}, g_full_rows{0}, g_candidates{0};

bool screen_enabled() {
  static const bool on = [] { return !env_flag(EnvVar::no_argmax_screen); }();
  return on;
}

// The smallest float at least v (v >= 0, finite): rounded to nearest, then
// one step up where that fell below (subnormals included).
float round_up(double v) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) < v) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

// W quantized as the int8 product does it, and its rows' norms.
std::shared_ptr<ArgmaxScreen> make_screen(const Tensor& weight) {
  auto s = std::make_shared<ArgmaxScreen>();
  const std::int64_t N = weight.size(0), K = weight.size(1);
  const std::int64_t s0 = weight.stride(0), s1 = weight.stride(1);
  const float* w = weight.data<float>();
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t k = 0; k < K; ++k)
      if (!std::isfinite(w[i * s0 + k * s1])) return s;  // linear() gives what it gives
  auto q = detail::quantize_weight(weight, "linear_argmax");
  s->wnorm.resize(static_cast<std::size_t>(N));
  s->dnorm.resize(static_cast<std::size_t>(N));
  std::vector<double> norms(static_cast<std::size_t>(N));
  detail::parallel_for(N, detail::loop_threads(N * K >= parallel_grain()), [&](std::int64_t n) {
    const auto i = static_cast<std::size_t>(n);
    const double sw = q->scale[i];
    const std::int8_t* qn = q->q.data() + n * K;
    double w2 = 0, d2 = 0;
    for (std::int64_t k = 0; k < K; ++k) {
      const double v = w[n * s0 + k * s1];
      const double d = v - sw * qn[k];
      w2 += v * v;
      d2 += d * d;
    }
    norms[i] = std::sqrt(w2);
    s->wnorm[i] = round_up(norms[i]);
    s->dnorm[i] = round_up(std::sqrt(d2));
  });
  for (std::size_t i = 0; i < norms.size(); ++i) {
    if (!std::isfinite(s->wnorm[i]) || !std::isfinite(s->dnorm[i])) return s;
    s->wmax = std::max(s->wmax, norms[i]);
  }
  s->q = std::move(q);
  return s;
}

// y_n as the f32 kernel computes it, for `count` (<= 8) positions at once:
// eight independent FMA chains, each in the kernel's order.
void exact_logits(const float* x, const float* w, std::int64_t s0, std::int64_t s1, std::int64_t K,
                  const float* bias, const std::int64_t* n, int count, float* out) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const float* rows[8];
  for (int j = 0; j < 8; ++j) rows[j] = w + n[j < count ? j : 0] * s0;
  for (std::int64_t k = 0; k < K; ++k) {
    const float xk = x[k];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) acc[j] = std::fma(xk, rows[j][k * s1], acc[j]);
  }
  for (int j = 0; j < count; ++j) out[j] = bias ? acc[j] + bias[n[j]] : acc[j];
}

// The first position of the largest of the exact values at positions
// `cand` (ascending), computed in groups of eight.
std::int64_t best_of(const float* x, const float* w, std::int64_t s0, std::int64_t s1,
                     std::int64_t K, const float* bias, const std::vector<std::int64_t>& cand) {
  std::int64_t best = cand.front();
  float best_value = 0;
  bool first = true;
  float v[8];
  for (std::size_t i = 0; i < cand.size(); i += 8) {
    const int count = static_cast<int>(std::min<std::size_t>(8, cand.size() - i));
    exact_logits(x, w, s0, s1, K, bias, cand.data() + i, count, v);
    for (int j = 0; j < count; ++j)
      if (first || v[j] > best_value) {
        best = cand[i + static_cast<std::size_t>(j)];
        best_value = v[j];
        first = false;
      }
  }
  return best;
}

// Row m's argmax through the screen; y' is the row's int8 result. Returns
// false where the bound is not finite (the caller computes the row in full).
bool screen_row(const ArgmaxScreen& s, const float* x, const float* yq, const float* w,
                std::int64_t s0, std::int64_t s1, std::int64_t K, std::int64_t N, const float* bias,
                double bmax, std::int64_t* out) {
  thread_local std::vector<std::int8_t> q;
  thread_local std::vector<float> upper;
  thread_local std::vector<std::int64_t> cand;
  q.resize(static_cast<std::size_t>(K));
  // x's quantization as the int8 product made it, and the three norms.
  const float sx = detail::quantize_row_as_run(x, K, q.data());
  if (!std::isfinite(sx)) return false;
  double a2 = 0, b2 = 0, c2 = 0;
  for (std::int64_t k = 0; k < K; ++k) {
    const double xk = x[k];
    const double xh = static_cast<double>(sx) * q[k];
    a2 += (xk - xh) * (xk - xh);
    b2 += xh * xh;
    c2 += xk * xk;
  }
  const double A = std::sqrt(a2), B = std::sqrt(b2), C = std::sqrt(c2);
  // A partial sum of the f32 chain could overflow: the analysis assumes none.
  if (!(C * s.wmax * 1.01 + bmax < 0.5 * std::numeric_limits<float>::max())) return false;
  const double u32 = std::ldexp(1.0, -24), Ku = static_cast<double>(K) * u32;
  const double c = Ku / (1 - Ku) + 8 * u32;
  // E_n = ew wn + ed dn + eb |b_n| + 2^-20 |y'_n| + 1e-30 (the 1.01 inside).
  const float ew = round_up(1.01 * (A + c * (C + B)));
  const float ed = round_up(1.01 * (B + c * B));
  const float eb = round_up(1.01 * c);
  const float ey = std::ldexp(1.0f, -20), e0 = 1e-30f;
  const float* wn = s.wnorm.data();
  const float* dn = s.dnorm.data();
  // upper[n] = y'_n + E_n; L = max_n y'_n - E_n.
  upper.resize(static_cast<std::size_t>(N));
  float* up = upper.data();
  float L = -std::numeric_limits<float>::infinity();
  int bad = 0;  // y' not finite (an infinity or a NaN in the bias, an overflow), or E_n NaN
#pragma omp simd reduction(max : L) reduction(+ : bad)
  for (std::int64_t n = 0; n < N; ++n) {
    const float b = bias ? std::fabs(bias[n]) : 0.0f;
    const float e = ew * wn[n] + ed * dn[n] + eb * b + ey * std::fabs(yq[n]) + e0;
    up[n] = yq[n] + e;
    bad += !(std::fabs(yq[n]) <= std::numeric_limits<float>::max()) + !(e >= 0.0f);
    L = std::max(L, yq[n] - e);
  }
  if (bad != 0 || !std::isfinite(L)) return false;
  // The candidates: blocks of 16 tested at once, the few that hold one
  // looked at one by one.
  cand.clear();
  for (std::int64_t n0 = 0; n0 < N; n0 += 16) {
    const std::int64_t n1 = std::min<std::int64_t>(N, n0 + 16);
    int any = 0;
#pragma omp simd reduction(| : any)
    for (std::int64_t n = n0; n < n1; ++n) any |= up[n] >= L;
    if (any)
      for (std::int64_t n = n0; n < n1; ++n)
        if (up[n] >= L) cand.push_back(n);
  }
  if (cand.empty()) return false;  // only where the arithmetic above saw a NaN
  g_candidates.fetch_add(static_cast<std::int64_t>(cand.size()), std::memory_order_relaxed);
  *out = best_of(x, w, s0, s1, K, bias, cand);
  return true;
}

// Every row of linear(x, weight, bias), then each row's argmax.
Tensor plain_argmax(const Tensor& x, const Tensor& weight, const Tensor& bias,
                    const Shape& out_shape) {
  Tensor out = Tensor::empty(out_shape, DType::i64);
  const std::int64_t N = weight.size(0), M = out.numel();
  if (M == 0) return out;
  const Tensor y = linear(x, weight, bias).detach().contiguous();
  std::int64_t* o = out.data<std::int64_t>();
  if (y.dtype() == DType::f32) {
    detail::rows_argmax(y.data<float>(), M, N, o);
    return out;
  }
  dispatch_float(y.dtype(), "linear_argmax", [&]<class T>() {
    // The same rule in f64: the first of the largest, NaNs passed over
    // unless first.
    const T* p = y.data<T>();
    for (std::int64_t m = 0; m < M; ++m) {
      const T* row = p + m * N;
      std::int64_t best = 0;
      if (!std::isnan(row[0]))
        for (std::int64_t n = 1; n < N; ++n)
          if (row[n] > row[best]) best = n;
      o[m] = best;
    }
  });
  return out;
}

}  // namespace

namespace detail {

ArgmaxScreenStats argmax_screen_stats() {
  return {g_rows.load(), g_full_rows.load(), g_candidates.load()};
}

}  // namespace detail

Tensor linear_argmax(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_linear_shapes(x, weight, bias, "linear_argmax");
  const std::int64_t N = weight.size(0), K = weight.size(1);
  ATTN_CHECK(N > 0, ShapeError, "linear_argmax: a weight of 0 rows {} has no argmax",
             shape_str(weight.shape()));
  const Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  // The path is chosen as linear() chooses it, under the caller's grad mode:
  // a tensor that records gradients keeps linear()'s unpacked path.
  std::shared_ptr<ArgmaxScreen> screen;
  if (screen_enabled() && N >= kMinScreenN && K <= detail::kMaxK && int8_supported())
    screen = detail::packed_f32_screen(x, weight, bias, [&] { return make_screen(weight); });
  if (!screen || !screen->q) return plain_argmax(x, weight, bias, out_shape);
  autograd::NoGradGuard no_grad;  // positions have no gradient

  const Tensor xc = x.detach().contiguous();
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  const Tensor yq = detail::run_int8(xc, *screen->q, bc).contiguous();
  Tensor out = Tensor::empty(out_shape, DType::i64);
  const std::int64_t M = out.numel();
  std::int64_t* o = out.data<std::int64_t>();
  const float* px = xc.data<float>();
  const float* py = yq.data<float>();
  const float* pw = weight.data<float>();
  const float* pb = bc.defined() ? bc.data<float>() : nullptr;
  const std::int64_t s0 = weight.stride(0), s1 = weight.stride(1);
  double bmax = 0;
  for (std::int64_t n = 0; pb != nullptr && n < N; ++n)
    bmax = std::max(bmax, std::fabs(static_cast<double>(pb[n])));
  std::atomic<std::int64_t> full{0};
  detail::parallel_for(
      M, detail::loop_threads(M > 1 && M * N >= parallel_grain()), [&](std::int64_t m) {
        if (screen_row(*screen, px + m * K, py + m * N, pw, s0, s1, K, N, pb, bmax, o + m)) return;
        // In full: every position, exactly as the kernel computes it.
        thread_local std::vector<std::int64_t> all;
        all.resize(static_cast<std::size_t>(N));
        for (std::int64_t n = 0; n < N; ++n) all[static_cast<std::size_t>(n)] = n;
        std::vector<float> y(static_cast<std::size_t>(N));
        for (std::int64_t n = 0; n < N; n += 8)
          exact_logits(px + m * K, pw, s0, s1, K, pb, all.data() + n,
                       static_cast<int>(std::min<std::int64_t>(8, N - n)), y.data() + n);
        o[m] = detail::row_argmax(y.data(), N);
        full.fetch_add(1, std::memory_order_relaxed);
      });
  g_rows.fetch_add(M, std::memory_order_relaxed);
  g_full_rows.fetch_add(full.load(), std::memory_order_relaxed);
  return out;
}

}  // namespace attn
