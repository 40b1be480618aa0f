// attn/optim/optimizer.h — SGD, Adam (PyTorch's update rules) and gradient clipping.
//
// Parameters are updated in place; a parameter without a gradient is skipped.
#pragma once

#include <vector>

#include "attn/core/tensor.h"

namespace attn::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  void zero_grad();
  const std::vector<Tensor>& params() const { return params_; }
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }

 protected:
  std::vector<Tensor> params_;
  double lr_ = 0.0;
};

// p -= lr * grad
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr);
  void step() override;
};

// Adam (Kingma & Ba, arXiv 1412.6980) as torch.optim.Adam without weight decay:
// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8);
  void step() override { step_scaled(1.0); }
  // The step with every gradient multiplied by `grad_scale` first (rounded
  // to the parameter's type, as clip_grad_norm rounds it): clipping fused
  // into the update, without a pass that writes scaled gradients.
  //   double n = grad_norm(ps); adam.step_scaled(n > c ? c / n : 1.0);
  // gives the same bits as clip_grad_norm(ps, c); adam.step().
  void step_scaled(double grad_scale);
  std::int64_t steps() const { return t_; }
  // The moment estimates (for checkpoints): one (m, v) pair per parameter.
  std::vector<Tensor>& exp_avg() { return m_; }
  std::vector<Tensor>& exp_avg_sq() { return v_; }
  void set_steps(std::int64_t t) { t_ = t; }

 private:
  double beta1_, beta2_, eps_;
  std::int64_t t_ = 0;
  std::vector<Tensor> m_, v_;
};

// d2l's grad_clipping: if the global L2 norm of all gradients exceeds
// max_norm, scale every gradient by max_norm / norm. Returns the norm before clipping.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// The global L2 norm of all gradients (parameters without one are skipped).
// Each parameter's sum of squares is taken in one fixed order and the sums
// are added in parameter order, so the result does not depend on the number
// of threads (large parameters are summed in parallel with each other).
double grad_norm(const std::vector<Tensor>& params);

}  // namespace attn::optim
