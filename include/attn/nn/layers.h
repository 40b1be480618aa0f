// attn/nn/layers.h — Linear, Embedding, Dropout, LayerNorm (PyTorch semantics and names).
#pragma once

#include "attn/nn/module.h"

namespace attn::nn {

// y = x W^T + b.  x (..., in_features) -> (..., out_features).
// Parameters "weight" (out, in) and "bias" (out), initialized as PyTorch does:
// U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true,
         DType dtype = DType::f32);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  // relu(forward(x)) as one op (ops linear_relu): the same numbers.
  Tensor forward_relu(const Tensor& x) const;

  std::int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined when bias=false
};

// Token ids (...) -> vectors (..., embedding_dim). Parameter "weight"
// (num_embeddings, embedding_dim) ~ N(0, 1) as in PyTorch.
class Embedding : public Module {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, DType dtype = DType::f32);
  Tensor forward(const Tensor& ids) const;
  Tensor operator()(const Tensor& ids) const { return forward(ids); }

  std::int64_t num_embeddings, embedding_dim;
  Tensor weight;
};

// Zeroes each element with probability p in training mode and scales the rest
// by 1/(1-p); the identity in eval mode. Draws from the default generator.
class Dropout : public Module {
 public:
  explicit Dropout(double p);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  double p;
};

// Normalizes over the trailing dims `normalized_shape` (biased variance,
// eps 1e-5), then scales by "weight" (ones) and shifts by "bias" (zeros),
// both of shape normalized_shape — PyTorch's nn.LayerNorm(normalized_shape).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, DType dtype = DType::f32);
  explicit LayerNorm(std::int64_t normalized_dim, double eps = 1e-5, DType dtype = DType::f32)
      : LayerNorm(Shape{normalized_dim}, eps, dtype) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  Shape normalized_shape;
  double eps;
  Tensor weight, bias;
};

}  // namespace attn::nn
