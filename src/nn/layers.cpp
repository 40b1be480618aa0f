#include "attn/nn/layers.h"

#include <cmath>

#include "attn/nn/init.h"
#include "attn/ops/dropout.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/index.h"
#include "attn/ops/matmul.h"
#include "attn/ops/norm.h"

namespace attn::nn {

Linear::Linear(std::int64_t in, std::int64_t out, bool has_bias, DType dtype)
    : in_features(in), out_features(out) {
  ATTN_CHECK(in > 0 && out > 0, ValueError,
             "Linear: in_features and out_features must be positive, got {} and {}", in, out);
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight = register_parameter("weight", Tensor::empty({out, in}, dtype));
  init::uniform_(weight, -bound, bound);
  if (has_bias) {
    bias = register_parameter("bias", Tensor::empty({out}, dtype));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) const {
  ATTN_CHECK(x.dim() >= 1 && x.size(-1) == in_features, ShapeError,
             "Linear: expected input (..., {}), got {}", in_features, shape_str(x.shape()));
  return linear(x, weight, bias);
}

Tensor Linear::forward_relu(const Tensor& x) const {
  ATTN_CHECK(x.dim() >= 1 && x.size(-1) == in_features, ShapeError,
             "Linear: expected input (..., {}), got {}", in_features, shape_str(x.shape()));
  return linear_relu(x, weight, bias);
}

Embedding::Embedding(std::int64_t n, std::int64_t d, DType dtype)
    : num_embeddings(n), embedding_dim(d) {
  ATTN_CHECK(n > 0 && d > 0, ValueError,
             "Embedding: num_embeddings and embedding_dim must be positive, got {} and {}", n, d);
  weight = register_parameter("weight", Tensor::empty({n, d}, dtype));
  init::normal_(weight, 0.0, 1.0);
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids); }

Dropout::Dropout(double p_) : p(p_) {
  ATTN_CHECK(p >= 0.0 && p <= 1.0, ValueError, "Dropout: p must be in [0, 1], got {}", p);
}

Tensor Dropout::forward(const Tensor& x) const { return dropout(x, p, is_training()); }

LayerNorm::LayerNorm(Shape shape, double eps_, DType dtype)
    : normalized_shape(std::move(shape)), eps(eps_) {
  ATTN_CHECK(!normalized_shape.empty() && shape_numel(normalized_shape) > 0, ValueError,
             "LayerNorm: normalized_shape must be non-empty, got {}", shape_str(normalized_shape));
  weight = register_parameter("weight", ones(normalized_shape, dtype));
  bias = register_parameter("bias", zeros(normalized_shape, dtype));
}

Tensor LayerNorm::forward(const Tensor& x) const {
  std::int64_t k = static_cast<std::int64_t>(normalized_shape.size());
  Shape tail(x.shape().end() - std::min<std::int64_t>(k, x.dim()), x.shape().end());
  ATTN_CHECK(x.dim() >= k && tail == normalized_shape, ShapeError,
             "LayerNorm: expected input (..., {}), got {}",
             shape_str(normalized_shape).substr(1, shape_str(normalized_shape).size() - 2),
             shape_str(x.shape()));
  if (k == 1) return layer_norm(x, weight, bias, eps);
  // Several trailing dims: normalize them as one flattened dim.
  std::int64_t d = shape_numel(normalized_shape);
  Tensor flat = x.reshape({-1, d});
  Tensor y = layer_norm(flat, weight.reshape({d}), bias.reshape({d}), eps);
  return y.reshape(x.shape());
}

}  // namespace attn::nn
