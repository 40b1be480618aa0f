// attn/nn/conv.h — PyTorch's nn.Conv1d along the tokens of a sequence (ops/conv.h).
#pragma once

#include "attn/nn/module.h"

namespace attn::nn {

// X (B, n, in_channels) -> (B, n, out_channels): stride 1, zero padding that
// keeps n (padding='same'; see ops/conv.h for an even kernel_size). Batch
// first and channels last, so it reads a sequence of token vectors as every
// other attn layer does; PyTorch's Conv1d takes the same input transposed,
// (B, in_channels, n). Parameters "weight" (out_channels, in_channels,
// kernel_size) and "bias" (out_channels), PyTorch's names and shapes,
// initialized as PyTorch does: U(-1/sqrt(in_channels * kernel_size), +).
class Conv1d : public Module {
 public:
  Conv1d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size,
         bool bias = true, DType dtype = DType::f32);
  Tensor forward(const Tensor& X) const;
  Tensor operator()(const Tensor& X) const { return forward(X); }

  std::int64_t in_channels, out_channels, kernel_size;
  Tensor weight, bias;  // bias undefined when bias=false
};

}  // namespace attn::nn
