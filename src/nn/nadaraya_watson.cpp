#include "attn/nn/nadaraya_watson.h"

#include "attn/core/rng.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"
#include "attn/ops/softmax.h"

namespace attn::nn {

Tensor nw_average_pooling(const Tensor& y_train, std::int64_t n_queries) {
  ATTN_CHECK(y_train.dim() == 1 && y_train.numel() > 0, ShapeError,
             "nw_average_pooling: expected a non-empty 1-D y_train, got {}",
             shape_str(y_train.shape()));
  return mean(y_train).reshape({1}).expand({n_queries}).contiguous();
}

NWResult nw_nonparametric(const Tensor& x_query, const Tensor& x_train, const Tensor& y_train) {
  ATTN_CHECK(x_query.dim() == 1 && x_train.dim() == 1 && y_train.dim() == 1 &&
                 x_train.numel() == y_train.numel(),
             ShapeError,
             "nw_nonparametric: expected 1-D x_query, and 1-D x_train and y_train of one length; "
             "got {}, {}, {}",
             shape_str(x_query.shape()), shape_str(x_train.shape()), shape_str(y_train.shape()));
  // (n_q, 1) - (1, n_train) -> (n_q, n_train)
  Tensor diff = sub(x_query.unsqueeze(1), x_train.unsqueeze(0));
  Tensor weights = softmax(div(neg(mul(diff, diff)), 2.0));
  Tensor y_hat = matmul(weights, y_train.unsqueeze(1)).squeeze(1);
  return {y_hat, weights};
}

NWKernelRegression::NWKernelRegression() { w = register_parameter("w", rand({1})); }

Tensor NWKernelRegression::forward(const Tensor& queries, const Tensor& keys,
                                   const Tensor& values) {
  ATTN_CHECK(
      queries.dim() == 1 && keys.dim() == 2 && keys.shape() == values.shape() &&
          keys.size(0) == queries.size(0),
      ShapeError,
      "NWKernelRegression: expected queries (n), keys (n, m) and values (n, m); got {}, {}, {}",
      shape_str(queries.shape()), shape_str(keys.shape()), shape_str(values.shape()));
  // d2l: queries.repeat_interleave(m).reshape(-1, m); a broadcast does the same.
  Tensor d = mul(sub(queries.unsqueeze(1), keys), w);
  Tensor weights = softmax(div(neg(mul(d, d)), 2.0));
  attention_weights = weights.detach();
  // bmm(weights (n, 1, m), values (n, m, 1)) -> (n)
  return bmm(weights.unsqueeze(1), values.unsqueeze(-1)).reshape({-1});
}

}  // namespace attn::nn
