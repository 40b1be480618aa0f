// attn.ops: the chapter's operations, with the contracts of their headers
// (attn/ops/softmax.h, attn/ops/attention.h, attn/nn/attention.h,
// attn/ops/matmul.h) as docstrings.
#include <pybind11/stl.h>

#include "attn/nn/attention.h"
#include "attn/ops/attention.h"
#include "attn/ops/matmul.h"
#include "attn/ops/softmax.h"
#include "bindings.h"
#include "compute.h"
#include "convert.h"

namespace attn::python {
namespace {

constexpr const char* kMaskedSoftmaxDoc = R"doc(
d2l's masked softmax: the softmax over the last dim of the scores X
(batch, queries, keys), where query q of batch element b sees only the first
L keys and the others get weight 0.

valid_lens — d2l's valid-lengths rule:
  None          no mask: a plain softmax over all keys;
  shape (B,)    every query of element b sees the first valid_lens[b] keys;
  shape (B, Q)  query q of element b sees the first valid_lens[b, q] keys.
Any dtype; every value in [0, K] (a fractional l counts as ceil(l)).

As in d2l, masked scores are set to -1e6 before the softmax, so masked
weights are exactly 0 and a row of valid length 0 (every score masked to
the same value) is uniform, 1/K over all K keys — never NaN, forward or
backward. The gradient with respect to a masked score (and to every score
of a row of length 0) is 0. The result equals
softmax(where(k < L, X, -1e6)); differentiable in X.
ValueError for another shape of X or valid_lens, or a length outside [0, K].)doc";

constexpr const char* kAttentionDoc = R"doc(
d2l's DotProductAttention as one fused op (FlashAttention-2 style: the
(Q x K) scores are never stored):
  scores  S = scale * queries keys^T     (scale = 1 / sqrt(d) by default)
  weights A = masked_softmax(S, valid_lens)
  output    = dropout(A) values

Layouts (all three of the same rank):
  3-D  queries (N, Q, d), keys (N, K, d), values (N, K, v) -> (N, Q, v)
  4-D  queries (B, Q, H, d), keys (B, K, H, d), values (B, K, H, v)
       -> (B, Q, H, v): a Linear's output (B, T, H * d) read as H heads,
       valid_lens indexed by b and shared by the heads.
valid_lens follows masked_softmax's rule; `causal` also limits query q to
keys k < q + 1 + (K - Q) (d2l's dec_valid_lens = 1..T when Q == K). Dropout
on the weights only with training=True and dropout > 0, drawn from the
default generator. float32 or float64. Differentiable in queries, keys and
values.)doc";

AttentionOptions attention_options(const py::object& valid_lens, bool causal, double dropout,
                                   bool training, const py::object& scale) {
  AttentionOptions o;
  o.valid_lens = to_optional_tensor(valid_lens, "valid_lens");
  o.causal = causal;
  o.dropout = dropout;
  o.training = training;
  o.scale = scale.is_none() ? 0.0 : scale.cast<double>();
  ATTN_CHECK(scale.is_none() || o.scale > 0, ValueError,
             "scaled_dot_product_attention: scale must be positive, got {}", o.scale);
  return o;
}

}  // namespace

void bind_ops(py::module_& ops) {
  ops.def(
      "masked_softmax",
      [](const py::object& X, const py::object& valid_lens) {
        Tensor x = to_tensor(X, "masked_softmax: X");
        Tensor lens = to_optional_tensor(valid_lens, "masked_softmax: valid_lens");
        return compute([&] { return nn::masked_softmax(x, lens); });
      },
      py::arg("X"), py::arg("valid_lens") = py::none(), kMaskedSoftmaxDoc);
  ops.def(
      "softmax",
      [](const py::object& X) {
        Tensor x = to_tensor(X, "softmax: X");
        return compute([&] { return softmax(x); });
      },
      py::arg("X"),
      "Softmax over the last dim, each row shifted by its max first (a row of equal values "
      "gives the uniform 1/D; a row of all -inf gives NaN, as in PyTorch). float32 or float64; "
      "differentiable.");
  ops.def(
      "log_softmax",
      [](const py::object& X) {
        Tensor x = to_tensor(X, "log_softmax: X");
        return compute([&] { return log_softmax(x); });
      },
      py::arg("X"), "log(softmax(X)) over the last dim, computed stably; differentiable.");
  ops.def(
      "scaled_dot_product_attention",
      [](const py::object& q, const py::object& k, const py::object& v,
         const py::object& valid_lens, bool causal, double dropout, bool training,
         const py::object& scale) {
        Tensor tq = to_tensor(q, "queries"), tk = to_tensor(k, "keys"), tv = to_tensor(v, "values");
        AttentionOptions o = attention_options(valid_lens, causal, dropout, training, scale);
        return compute([&] { return scaled_dot_product_attention(tq, tk, tv, o); });
      },
      py::arg("queries"), py::arg("keys"), py::arg("values"), py::arg("valid_lens") = py::none(),
      py::arg("causal") = false, py::arg("dropout") = 0.0, py::arg("training") = false,
      py::arg("scale") = py::none(), kAttentionDoc);
  ops.def(
      "scaled_dot_product_attention_weights",
      [](const py::object& q, const py::object& k, const py::object& v,
         const py::object& valid_lens, bool causal, double dropout, bool training,
         const py::object& scale) {
        Tensor tq = to_tensor(q, "queries"), tk = to_tensor(k, "keys"), tv = to_tensor(v, "values");
        AttentionOptions o = attention_options(valid_lens, causal, dropout, training, scale);
        auto r = compute([&] { return scaled_dot_product_attention_materialized(tq, tk, tv, o); });
        return py::make_tuple(r.output, r.weights);
      },
      py::arg("queries"), py::arg("keys"), py::arg("values"), py::arg("valid_lens") = py::none(),
      py::arg("causal") = false, py::arg("dropout") = 0.0, py::arg("training") = false,
      py::arg("scale") = py::none(),
      "The same attention as scaled_dot_product_attention, computed d2l's way with the weights "
      "stored: returns (output, weights), weights (N, Q, K) — (B * H, Q, K) in the 4-D layout, "
      "d2l's transpose_qkv order — before dropout, in the autograd graph.");
  ops.def(
      "matmul",
      [](const py::object& a, const py::object& b) {
        Tensor ta = to_tensor(a, "matmul: a"), tb = to_tensor(b, "matmul: b");
        return compute([&] { return matmul(ta, tb); });
      },
      py::arg("a"), py::arg("b"),
      "a (..., M, K) @ b (..., K, N) -> (..., M, N), the batch dims broadcast (torch.matmul "
      "for operands of at least 2 dims). Both float32 (oneDNN) or both float64.");
  ops.def(
      "bmm",
      [](const py::object& a, const py::object& b) {
        Tensor ta = to_tensor(a, "bmm: a"), tb = to_tensor(b, "bmm: b");
        return compute([&] { return bmm(ta, tb); });
      },
      py::arg("a"), py::arg("b"), "a (B, M, K) @ b (B, K, N) -> (B, M, N), strictly 3-D.");
  ops.def(
      "linear",
      [](const py::object& x, const py::object& weight, const py::object& bias) {
        Tensor tx = to_tensor(x, "linear: x"), tw = to_tensor(weight, "linear: weight");
        Tensor tb = to_optional_tensor(bias, "linear: bias");
        return compute([&] { return linear(tx, tw, tb); });
      },
      py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(),
      "x (..., K), weight (N, K), bias (N) or None -> x @ weight^T + bias (..., N), one op.");
  ops.def(
      "transpose_qkv",
      [](const py::object& X, std::int64_t num_heads) {
        Tensor x = to_tensor(X, "transpose_qkv: X");
        return compute([&] { return nn::transpose_qkv(x, num_heads); });
      },
      py::arg("X"), py::arg("num_heads"),
      "(B, T, num_hiddens) -> (B * num_heads, T, num_hiddens / num_heads): head i of batch "
      "element b at row b * num_heads + i (d2l's transpose_qkv).");
  ops.def(
      "transpose_output",
      [](const py::object& X, std::int64_t num_heads) {
        Tensor x = to_tensor(X, "transpose_output: X");
        return compute([&] { return nn::transpose_output(x, num_heads); });
      },
      py::arg("X"), py::arg("num_heads"),
      "The inverse of transpose_qkv: (B * num_heads, T, d) -> (B, T, num_heads * d).");
}

}  // namespace attn::python
