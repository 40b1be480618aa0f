// attn/nn/rnn.h — PyTorch's nn.GRU: a stack of GRU layers (ops/rnn.h).
//
// Time-major, as nn.GRU and d2l's RNN encoder–decoder (section 10.4):
//   X (T, B, input_size), H0 (num_layers, B, hidden_size) or undefined (zeros)
//   -> outputs (T, B, hidden_size) of the last layer,
//      state (num_layers, B, hidden_size): every layer's last hidden state.
// Parameters under PyTorch's names, per layer k: weight_ih_l{k} (3H, in_k),
// weight_hh_l{k} (3H, H), bias_ih_l{k} (3H), bias_hh_l{k} (3H), gates in the
// order (r, z, n); in_0 = input_size, in_k = H. Initialized as PyTorch does:
// U(-1/sqrt(H), 1/sqrt(H)). Dropout (in training mode) on the outputs of
// every layer but the last, as nn.GRU's `dropout`.
#pragma once

#include <array>

#include "attn/nn/layers.h"

namespace attn::nn {

class GRU : public Module {
 public:
  GRU(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1,
      double dropout = 0.0, DType dtype = DType::f32);

  struct Output {
    Tensor outputs;  // (T, B, H)
    Tensor state;  // (num_layers, B, H)
  };
  Output forward(const Tensor& X, const Tensor& H0 = Tensor()) const;

  std::int64_t input_size, hidden_size, num_layers;
  double dropout;
  // Per layer: weight_ih, weight_hh, bias_ih, bias_hh.
  std::vector<std::array<Tensor, 4>> layers;
};

}  // namespace attn::nn
