// attn/nn/nadaraya_watson.h — attention pooling as kernel regression (d2l 10.2).
//
//   f(x) = sum_i softmax_i(-(x - x_i)^2 / 2) y_i              (nonparametric)
//   f(x) = sum_i softmax_i(-((x - x_i) w)^2 / 2) y_i          (parametric, learned w)
#pragma once

#include "attn/nn/module.h"

namespace attn::nn {

// Average pooling: every query predicts mean(y_train). Returns (n_queries).
Tensor nw_average_pooling(const Tensor& y_train, std::int64_t n_queries);

struct NWResult {
  Tensor y_hat;  // (n_queries)
  Tensor attention_weights;  // (n_queries, n_train)
};

// Nonparametric Nadaraya–Watson with a Gaussian kernel of width 1.
NWResult nw_nonparametric(const Tensor& x_query, const Tensor& x_train, const Tensor& y_train);

// The parametric model with one learned width "w" (shape (1), U[0, 1) at
// start, as d2l's torch.rand((1,))).
class NWKernelRegression : public Module {
 public:
  NWKernelRegression();
  // queries (n), keys (n, m), values (n, m) -> (n)
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values);

  Tensor w;
  Tensor attention_weights;  // (n, m), detached
};

}  // namespace attn::nn
