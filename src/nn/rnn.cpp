#include "attn/nn/rnn.h"

#include <cmath>

#include "attn/nn/init.h"
#include "attn/ops/dropout.h"
#include "attn/ops/index.h"
#include "attn/ops/rnn.h"

namespace attn::nn {

GRU::GRU(std::int64_t input, std::int64_t hidden, std::int64_t n, double p, DType dtype)
    : input_size(input), hidden_size(hidden), num_layers(n), dropout(p) {
  ATTN_CHECK(input > 0 && hidden > 0 && n > 0, ValueError,
             "GRU: input_size, hidden_size and num_layers must be positive, got {}, {}, {}", input,
             hidden, n);
  ATTN_CHECK(p >= 0 && p <= 1, ValueError, "GRU: dropout must be in [0, 1], got {}", p);
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t in = k ? hidden : input;
    const std::string l = "_l" + std::to_string(k);
    std::array<Tensor, 4> w = {
        register_parameter("weight_ih" + l, Tensor::empty({3 * hidden, in}, dtype)),
        register_parameter("weight_hh" + l, Tensor::empty({3 * hidden, hidden}, dtype)),
        register_parameter("bias_ih" + l, Tensor::empty({3 * hidden}, dtype)),
        register_parameter("bias_hh" + l, Tensor::empty({3 * hidden}, dtype))};
    for (const Tensor& t : w) init::uniform_(t, -bound, bound);
    layers.push_back(w);
  }
}

GRU::Output GRU::forward(const Tensor& X, const Tensor& H0) const {
  ATTN_CHECK(X.dim() == 3 && X.size(2) == input_size, ShapeError,
             "GRU: expected X of shape (T, B, {}), got {}", input_size, shape_str(X.shape()));
  const std::int64_t B = X.size(1);
  ATTN_CHECK(!H0.defined() || H0.shape() == (Shape{num_layers, B, hidden_size}), ShapeError,
             "GRU: expected H0 of shape ({}, {}, {}), got {}", num_layers, B, hidden_size,
             H0.defined() ? shape_str(H0.shape()) : std::string());
  Tensor x = X;
  std::vector<Tensor> states;
  for (std::int64_t k = 0; k < num_layers; ++k) {
    const auto& w = layers[static_cast<std::size_t>(k)];
    Tensor h0 = H0.defined() ? H0.select(0, k) : zeros({B, hidden_size}, X.dtype());
    Tensor out = gru(x, h0, w[0], w[1], w[2], w[3]);
    states.push_back(X.size(0) ? out.select(0, X.size(0) - 1) : h0);
    x = k + 1 < num_layers ? attn::dropout(out, dropout, is_training()) : out;
  }
  return {x, stack(states, 0)};
}

}  // namespace attn::nn
