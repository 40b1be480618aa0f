#include "attn/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "attn/core/error.h"
#include "attn/core/threads.h"
#include "core/parallel.h"

namespace attn::optim {

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (const auto& p : params_) {
    ATTN_CHECK(p.defined() && is_floating(p.dtype()) && p.is_contiguous(), ValueError,
               "Optimizer: parameters must be defined, floating and contiguous");
  }
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.zero_grad();
}

SGD::SGD(std::vector<Tensor> params, double lr) : Optimizer(std::move(params)) {
  ATTN_CHECK(lr > 0 && std::isfinite(lr), ValueError, "SGD: lr must be positive, got {}", lr);
  lr_ = lr;
}

void SGD::step() {
  for (auto& p : params_) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor gc = g.contiguous();
    dispatch_float(p.dtype(), "SGD", [&]<class T>() {
      T* pp = p.data<T>();
      const T* pg = gc.data<T>();
      const T lr = static_cast<T>(lr_);
      const std::int64_t n = p.numel();
      for (std::int64_t i = 0; i < n; ++i) pp[i] -= lr * pg[i];
    });
  }
}

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps)
    : Optimizer(std::move(params)), beta1_(beta1), beta2_(beta2), eps_(eps) {
  ATTN_CHECK(lr > 0 && std::isfinite(lr), ValueError, "Adam: lr must be positive, got {}", lr);
  ATTN_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, ValueError,
             "Adam: betas must be in [0, 1), got ({}, {})", beta1, beta2);
  lr_ = lr;
  for (const auto& p : params_) {
    m_.push_back(zeros(p.shape(), p.dtype()));
    v_.push_back(zeros(p.shape(), p.dtype()));
  }
}

namespace {

template <class T>
struct AdamStep {
  T *p, *m, *v;
  const T* g;
  T b1, b2, c1, c2, step, rbc2, eps;
  bool scaled;
  double grad_scale;
};

// Elements [b, e) of one Adam step; the constants copied into locals, so
// that the stores cannot alias them and the loop stays vectorized.
template <class T>
void adam_update(const AdamStep<T>& st, std::int64_t b, std::int64_t e) {
  T *pp = st.p, *pm = st.m, *pv = st.v;
  const T* pg = st.g;
  const T b1 = st.b1, b2 = st.b2, c1 = st.c1, c2 = st.c2, step = st.step, rbc2 = st.rbc2,
          eps = st.eps;
  // Unscaled, the factor is 1: g * 1.0 in double and back is g exactly. (A
  // conditional product kept the loop scalar on AVX2: GCC does not speculate
  // an operation that may trap.)
  const double grad_scale = st.scaled ? st.grad_scale : 1.0;
#pragma omp simd
  for (std::int64_t i = b; i < e; ++i) {
    const T gi = static_cast<T>(pg[i] * grad_scale);
    pm[i] = b1 * pm[i] + c1 * gi;
    pv[i] = b2 * pv[i] + c2 * gi * gi;
    pp[i] -= step * pm[i] / (std::sqrt(pv[i]) * rbc2 + eps);
  }
}

}  // namespace

void Adam::step_scaled(double grad_scale) {
  ATTN_CHECK(std::isfinite(grad_scale) && grad_scale > 0, ValueError,
             "Adam: grad_scale must be positive and finite, got {}", grad_scale);
  ++t_;
  const double bc1 = 1.0 - std::pow(beta1_, static_cast<double>(t_));
  const double bc2 = 1.0 - std::pow(beta2_, static_cast<double>(t_));
  const bool scaled = grad_scale != 1.0;
  // The f32 parameters (all of a model's) in one team: their elements as one
  // range, split over the threads across parameter boundaries, so that the
  // step forks once and every parameter's elements are shared whatever its
  // size (one per parameter, a team each, left the small ones on one thread).
  // Element by element, so the result is the same on any number of threads.
  std::vector<AdamStep<float>> steps;
  std::vector<std::int64_t> starts = {0};  // steps[i] covers [starts[i], starts[i + 1])
  std::vector<Tensor> grads;  // keeps contiguous copies alive
  for (std::size_t k = 0; k < params_.size(); ++k) {
    Tensor& p = params_[k];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    grads.push_back(g.contiguous());
    const Tensor& gc = grads.back();
    dispatch_float(p.dtype(), "Adam", [&]<class T>() {
      AdamStep<T> st;
      st.p = p.data<T>();
      st.m = m_[k].data<T>();
      st.v = v_[k].data<T>();
      st.g = gc.data<T>();
      // 1 - beta in double, then rounded (as PyTorch): 1 - 0.999f loses digits.
      st.b1 = static_cast<T>(beta1_);
      st.b2 = static_cast<T>(beta2_);
      st.c1 = static_cast<T>(1.0 - beta1_);
      st.c2 = static_cast<T>(1.0 - beta2_);
      st.step = static_cast<T>(lr_ / bc1);
      st.rbc2 = static_cast<T>(1.0 / std::sqrt(bc2));
      st.eps = static_cast<T>(eps_);
      st.scaled = scaled;
      st.grad_scale = grad_scale;
      const std::int64_t n = p.numel();
      if constexpr (std::is_same_v<T, float>) {
        steps.push_back(st);
        starts.push_back(starts.back() + n);
      } else {
        detail::parallel_ranges(n, detail::loop_threads(n >= parallel_grain()),
                                [&](std::int64_t b, std::int64_t e) { adam_update(st, b, e); });
      }
    });
  }
  const std::int64_t total = starts.back();
  detail::parallel_ranges(
      total, detail::loop_threads(total >= parallel_grain()), [&](std::int64_t b, std::int64_t e) {
        auto i = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), b) -
                                          starts.begin() - 1);
        for (; b < e; ++i) {
          const std::int64_t end = std::min(e, starts[i + 1]);
          adam_update(steps[i], b - starts[i], end - starts[i]);
          b = end;
        }
      });
}

namespace {

// The sum of squares of one gradient, in one fixed order.
double sum_of_squares(const Tensor& gc) {
  double s = 0.0;
  dispatch_float(gc.dtype(), "grad_norm", [&]<class T>() {
    const T* pg = gc.data<T>();
    const std::int64_t n = gc.numel();
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (std::int64_t i = 0; i < n; ++i) acc += static_cast<double>(pg[i]) * pg[i];
    s = acc;
  });
  return s;
}

}  // namespace

double grad_norm(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  std::int64_t total_numel = 0;
  for (const auto& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    grads.push_back(g.contiguous());
    total_numel += grads.back().numel();
  }
  std::vector<double> sums(grads.size(), 0.0);
  const std::int64_t n = static_cast<std::int64_t>(grads.size());
  auto one = [&](std::int64_t k) {
    const auto i = static_cast<std::size_t>(k);
    sums[i] = sum_of_squares(grads[i]);
  };
  if (detail::loop_threads(total_numel >= parallel_grain() && n > 1) > 1) {
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t k = 0; k < n; ++k) one(k);
  } else {
    for (std::int64_t k = 0; k < n; ++k) one(k);
  }
  double total = 0.0;
  for (double s : sums) total += s;
  return std::sqrt(total);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  const double norm = grad_norm(params);
  if (norm > max_norm) {
    double scale = max_norm / norm;
    for (const auto& p : params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      Tensor gc = g.contiguous().clone();
      dispatch_float(gc.dtype(), "clip_grad_norm", [&]<class T>() {
        T* pg = gc.data<T>();
        const std::int64_t n = gc.numel();
        for (std::int64_t i = 0; i < n; ++i) pg[i] = static_cast<T>(pg[i] * scale);
      });
      p.set_grad(gc);
    }
  }
  return norm;
}

}  // namespace attn::optim
