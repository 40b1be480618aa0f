#include "attn/nn/attention.h"

#include <cmath>

#include "attn/ops/elementwise.h"
#include "attn/ops/index.h"
#include "attn/ops/matmul.h"
#include "attn/ops/softmax.h"

namespace attn::nn {

Tensor masked_softmax(const Tensor& X, const Tensor& valid_lens) {
  if (!valid_lens.defined()) return softmax(X);
  ATTN_CHECK(X.dim() == 3, ShapeError, "masked_softmax: expected scores of shape (B, Q, K), got {}",
             shape_str(X.shape()));
  const std::int64_t B = X.size(0), Q = X.size(1);
  bool per_batch = valid_lens.dim() == 1 && valid_lens.size(0) == B;
  bool per_query = valid_lens.dim() == 2 && valid_lens.size(0) == B && valid_lens.size(1) == Q;
  ATTN_CHECK(per_batch || per_query, ShapeError,
             "masked_softmax: valid_lens must have shape ({}) or ({}, {}) for scores {}, got {}", B,
             B, Q, shape_str(X.shape()), shape_str(valid_lens.shape()));
  // One length per row of scores: (B) is shared by the Q queries of each batch element.
  Tensor lens = per_batch ? valid_lens.unsqueeze(1).expand({B, Q}) : valid_lens;
  return masked_softmax_lengths(X, lens);
}

namespace {
void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const char* op) {
  ATTN_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3, ShapeError,
             "{}: expected 3-D queries, keys and values (batch, steps, features), got {}, {}, {}",
             op, shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  ATTN_CHECK(q.size(0) == k.size(0) && k.size(0) == v.size(0), ShapeError,
             "{}: batch sizes differ: queries {}, keys {}, values {}", op, shape_str(q.shape()),
             shape_str(k.shape()), shape_str(v.shape()));
  ATTN_CHECK(k.size(1) == v.size(1), ShapeError,
             "{}: keys {} and values {} must have the same number of steps", op,
             shape_str(k.shape()), shape_str(v.shape()));
}
}  // namespace

AdditiveAttention::AdditiveAttention(std::int64_t key_size, std::int64_t query_size,
                                     std::int64_t num_hiddens, double p) {
  W_k = register_module("W_k", std::make_shared<Linear>(key_size, num_hiddens, false));
  W_q = register_module("W_q", std::make_shared<Linear>(query_size, num_hiddens, false));
  w_v = register_module("w_v", std::make_shared<Linear>(num_hiddens, 1, false));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
}

Tensor AdditiveAttention::forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                                  const Tensor& valid_lens) {
  check_qkv(queries, keys, values, "AdditiveAttention");
  Tensor q = W_q->forward(queries), k = W_k->forward(keys);
  // (B, Q, 1, h) + (B, 1, K, h) -> (B, Q, K, h)
  Tensor features = tanh(add(q.unsqueeze(2), k.unsqueeze(1)));
  Tensor scores = w_v->forward(features).squeeze(-1);
  Tensor weights = masked_softmax(scores, valid_lens);
  attention_weights = weights.detach();
  return bmm(dropout->forward(weights), values);
}

DotProductAttention::DotProductAttention(double p) {
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
}

Tensor DotProductAttention::forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                                    const Tensor& valid_lens) {
  check_qkv(queries, keys, values, "DotProductAttention");
  ATTN_CHECK(queries.size(2) == keys.size(2), ShapeError,
             "DotProductAttention: queries {} and keys {} must have the same feature size",
             shape_str(queries.shape()), shape_str(keys.shape()));
  double d = static_cast<double>(queries.size(2));
  Tensor scores = div(bmm(queries, keys.transpose(1, 2)), std::sqrt(d));
  Tensor weights = masked_softmax(scores, valid_lens);
  attention_weights = weights.detach();
  return bmm(dropout->forward(weights), values);
}

Tensor transpose_qkv(const Tensor& X, std::int64_t num_heads) {
  ATTN_CHECK(X.dim() == 3 && X.size(2) % num_heads == 0, ShapeError,
             "transpose_qkv: expected (B, T, H) with H divisible by {} heads, got {}", num_heads,
             shape_str(X.shape()));
  Tensor t = X.reshape({X.size(0), X.size(1), num_heads, -1}).permute({0, 2, 1, 3});
  return t.reshape({-1, t.size(2), t.size(3)});
}

Tensor transpose_output(const Tensor& X, std::int64_t num_heads) {
  ATTN_CHECK(X.dim() == 3 && X.size(0) % num_heads == 0, ShapeError,
             "transpose_output: expected (B * {}, T, d), got {}", num_heads, shape_str(X.shape()));
  Tensor t = X.reshape({-1, num_heads, X.size(1), X.size(2)}).permute({0, 2, 1, 3});
  return t.reshape({t.size(0), t.size(1), -1});
}

MultiHeadAttention::MultiHeadAttention(std::int64_t key_size, std::int64_t query_size,
                                       std::int64_t value_size, std::int64_t hiddens,
                                       std::int64_t heads, double p, bool bias)
    : num_hiddens(hiddens), num_heads(heads) {
  ATTN_CHECK(heads > 0, ValueError, "MultiHeadAttention: num_heads must be positive, got {}",
             heads);
  ATTN_CHECK(hiddens % heads == 0, ValueError,
             "MultiHeadAttention: num_hiddens {} is not divisible by num_heads {}", hiddens, heads);
  attention = register_module("attention", std::make_shared<DotProductAttention>(p));
  W_q = register_module("W_q", std::make_shared<Linear>(query_size, hiddens, bias));
  W_k = register_module("W_k", std::make_shared<Linear>(key_size, hiddens, bias));
  W_v = register_module("W_v", std::make_shared<Linear>(value_size, hiddens, bias));
  W_o = register_module("W_o", std::make_shared<Linear>(hiddens, hiddens, bias));
}

std::pair<Tensor, Tensor> MultiHeadAttention::project_kv(const Tensor& keys, const Tensor& values) {
  return {transpose_qkv(W_k->forward(keys), num_heads),
          transpose_qkv(W_v->forward(values), num_heads)};
}

Tensor MultiHeadAttention::attend(const Tensor& queries, const Tensor& K, const Tensor& V,
                                  const Tensor& valid_lens) {
  ATTN_CHECK(queries.dim() == 3 && queries.size(0) * num_heads == K.size(0), ShapeError,
             "MultiHeadAttention: queries {} do not match projected keys {} with {} heads",
             shape_str(queries.shape()), shape_str(K.shape()), num_heads);
  Tensor q = transpose_qkv(W_q->forward(queries), num_heads);
  Tensor lens;
  if (valid_lens.defined()) {
    ATTN_CHECK(valid_lens.dim() >= 1 && valid_lens.size(0) == queries.size(0), ShapeError,
               "MultiHeadAttention: valid_lens {} does not match batch size {}",
               shape_str(valid_lens.shape()), queries.size(0));
    lens = repeat_interleave(valid_lens, num_heads, 0);
  }
  Tensor out = attention->forward(q, K, V, lens);
  return W_o->forward(transpose_output(out, num_heads));
}

Tensor MultiHeadAttention::forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                                   const Tensor& valid_lens) {
  check_qkv(queries, keys, values, "MultiHeadAttention");
  auto [K, V] = project_kv(keys, values);
  return attend(queries, K, V, valid_lens);
}

}  // namespace attn::nn
