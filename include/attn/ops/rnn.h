// attn/ops/rnn.h — one gated recurrent unit (GRU) layer over a sequence.
//
// PyTorch's nn.GRU, one layer, gate order (r, z, n) in the stacked weights:
//   r_t = sigmoid(x_t W_ir^T + b_ir + h_{t-1} W_hr^T + b_hr)
//   z_t = sigmoid(x_t W_iz^T + b_iz + h_{t-1} W_hz^T + b_hz)
//   n_t = tanh(x_t W_in^T + b_in + r_t * (h_{t-1} W_hn^T + b_hn))
//   h_t = (1 - z_t) * n_t + z_t * h_{t-1}
// Time-major, as nn.GRU and d2l's Seq2SeqEncoder:
//   X (T, B, I), h0 (B, H), w_ih (3H, I), w_hh (3H, H), b_ih (3H), b_hh (3H)
//   -> outputs (T, B, H); the last state h_T is outputs[T - 1].
#pragma once

#include "attn/core/tensor.h"

namespace attn {

// The fused layer: the input projections of all T steps in one product, then
// per step one (B, H) x (H, 3H) product and one pass over the gates. The
// forward keeps the gates; the backward runs the steps in reverse with one
// product per step and finishes with three products over all steps:
//   with dh the gradient reaching h_t (from outputs[t] and from step t + 1),
//   dn = dh (1 - z),  dz = dh (h_{t-1} - n),  dn' = dn (1 - n^2)
//   dr' = dn' hn r (1 - r),  dz' = dz z (1 - z),  hn = h_{t-1} W_hn^T + b_hn
//   gx_t = [dr', dz', dn'],  gh_t = [dr', dz', dn' r]
//   dh_{t-1} = dh z + gh_t W_hh
//   dX = gx W_ih,  dW_ih = gx^T X,  db_ih = sum gx
//   dW_hh = gh^T [h_0 .. h_{T-1}],  db_hh = sum gh,  dh0 = dh_0
// f32 or f64, all operands of one dtype; either bias may be undefined. T may
// be 0 (empty outputs). Differentiable in every input.
Tensor gru(const Tensor& X, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh,
           const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

// The reference: the same layer written step by step with the library's
// differentiable ops (linear, sigmoid, tanh, ...), so autograd derives its
// backward. Same arguments, same result.
Tensor gru_reference(const Tensor& X, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

}  // namespace attn
