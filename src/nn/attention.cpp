#include "attn/nn/attention.h"

#include "attn/ops/attention.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/matmul.h"
#include "attn/ops/positions.h"
#include "attn/ops/softmax.h"

namespace attn::nn {

namespace {
thread_local int t_keep_weights = 0;
}  // namespace

KeepAttentionWeights::KeepAttentionWeights() { ++t_keep_weights; }
KeepAttentionWeights::~KeepAttentionWeights() { --t_keep_weights; }
bool attention_weights_kept() { return t_keep_weights > 0; }

Tensor masked_softmax(const Tensor& X, const Tensor& valid_lens) {
  if (!valid_lens.defined()) return softmax(X);
  ATTN_CHECK(X.dim() == 3, ShapeError, "masked_softmax: expected scores of shape (B, Q, K), got {}",
             shape_str(X.shape()));
  return masked_softmax_lengths(
      X, attention_limits(valid_lens, false, X.size(0), X.size(1), X.size(2), "masked_softmax"));
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

namespace {

// kv_rows: q's batch rows need not match those of k and v (the op checks the rows).
void check_heads(const Tensor& q, const Tensor& k, const Tensor& v, bool kv_rows) {
  ATTN_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, ShapeError,
             "DotProductAttention: expected queries, keys and values all 3-D (batch, steps, "
             "features) or all 4-D (batch, steps, heads, features), got {}, {}, {}",
             shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  // Keys and values may have fewer heads, a divisor of the queries' (grouped-query).
  ATTN_CHECK((kv_rows || q.size(0) == k.size(0)) && k.size(0) == v.size(0) && k.size(2) >= 1 &&
                 q.size(2) % k.size(2) == 0 && k.size(2) == v.size(2) && k.size(1) == v.size(1) &&
                 q.size(3) == k.size(3),
             ShapeError,
             "DotProductAttention: queries {}, keys {} and values {} do not agree in batch, "
             "steps, heads or features",
             shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
}

}  // namespace

Tensor DotProductAttention::forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                                    const Tensor& valid_lens, bool causal, const Tensor& kv_rows,
                                    const RelativePositions& positions) {
  if (queries.dim() == 4) {
    check_heads(queries, keys, values, kv_rows.defined());
  } else {
    ATTN_CHECK(!kv_rows.defined(), ShapeError,
               "DotProductAttention: kv_rows needs the heads layout (batch, steps, heads, "
               "features), got {}",
               shape_str(queries.shape()));
    check_qkv(queries, keys, values, "DotProductAttention");
    ATTN_CHECK(queries.size(2) == keys.size(2), ShapeError,
               "DotProductAttention: queries {} and keys {} must have the same feature size",
               shape_str(queries.shape()), shape_str(keys.shape()));
  }
  AttentionOptions opt;
  opt.valid_lens = valid_lens;
  opt.causal = causal;
  opt.kv_rows = kv_rows;
  opt.position_bias = positions.bias;
  opt.query_start = positions.query_start;
  opt.rotary_queries = positions.rotary_queries;
  opt.rotary_keys = positions.rotary_keys;
  opt.dropout = dropout->p;
  opt.training = dropout->is_training();
  if (!attention_weights_kept()) {
    // Written only when it changes: threads decoding side by side on one
    // model (seq2seq::translate_texts) then only read the module.
    if (attention_weights.defined()) attention_weights = Tensor();
    return scaled_dot_product_attention(queries, keys, values, opt);
  }
  // The materialized path, d2l's formulation, which keeps the weights.
  MaterializedAttention m = scaled_dot_product_attention_materialized(queries, keys, values, opt);
  attention_weights = m.weights.detach();
  return m.output;
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
                                       std::int64_t heads, double p, bool bias,
                                       std::int64_t kv_heads)
    : num_hiddens(hiddens), num_heads(heads), num_kv_heads(kv_heads == 0 ? heads : kv_heads) {
  ATTN_CHECK(heads > 0, ValueError, "MultiHeadAttention: num_heads must be positive, got {}",
             heads);
  ATTN_CHECK(hiddens % heads == 0, ValueError,
             "MultiHeadAttention: num_hiddens {} is not divisible by num_heads {}", hiddens, heads);
  ATTN_CHECK(num_kv_heads > 0 && heads % num_kv_heads == 0, ValueError,
             "MultiHeadAttention: num_kv_heads {} does not divide num_heads {}", kv_heads, heads);
  const std::int64_t kv_width = num_kv_heads * (hiddens / heads);
  attention = register_module("attention", std::make_shared<DotProductAttention>(p));
  W_q = register_module("W_q", std::make_shared<Linear>(query_size, hiddens, bias));
  W_k = register_module("W_k", std::make_shared<Linear>(key_size, kv_width, bias));
  W_v = register_module("W_v", std::make_shared<Linear>(value_size, kv_width, bias));
  W_o = register_module("W_o", std::make_shared<Linear>(hiddens, hiddens, bias));
}

namespace {
// (B, T, num_hiddens) -> (B, T, heads, num_hiddens / heads), a view when x is contiguous.
Tensor split_heads(const Tensor& x, std::int64_t heads) {
  return x.reshape({x.size(0), x.size(1), heads, -1});
}
}  // namespace

std::pair<Tensor, Tensor> MultiHeadAttention::project_kv(const Tensor& keys, const Tensor& values,
                                                         const Tensor& key_start) {
  Tensor K = split_heads(W_k->forward(keys), num_kv_heads);
  if (rotary) K = rotary_heads(K, key_start);
  return {K, split_heads(W_v->forward(values), num_kv_heads)};
}

Tensor MultiHeadAttention::attend(const Tensor& queries, const Tensor& K, const Tensor& V,
                                  const Tensor& valid_lens, bool causal, const Tensor& kv_rows,
                                  const RelativePositions& positions) {
  ATTN_CHECK(queries.dim() == 3 && K.dim() == 4 &&
                 (kv_rows.defined() || queries.size(0) == K.size(0)) && K.size(2) == num_kv_heads,
             ShapeError,
             "MultiHeadAttention: queries {} do not match projected keys {} with {} heads",
             shape_str(queries.shape()), shape_str(K.shape()), num_kv_heads);
  if (valid_lens.defined()) {
    ATTN_CHECK(valid_lens.dim() >= 1 && valid_lens.size(0) == queries.size(0), ShapeError,
               "MultiHeadAttention: valid_lens {} does not match batch size {}",
               shape_str(valid_lens.shape()), queries.size(0));
  }
  Tensor q = split_heads(W_q->forward(queries), num_heads);
  // Rotary: the kernels turn the queries (K was turned when projected,
  // unless forward() asks them to turn it too).
  RelativePositions pos = positions;
  pos.rotary_queries = rotary;
  Tensor out = attention->forward(q, K, V, valid_lens, causal, kv_rows, pos);  // (B, Q, heads, d)
  return W_o->forward(out.reshape({queries.size(0), queries.size(1), -1}));
}

Tensor MultiHeadAttention::forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                                   const Tensor& valid_lens, bool causal,
                                   const RelativePositions& positions) {
  check_qkv(queries, keys, values, "MultiHeadAttention");
  // The keys as projected: with rotary the kernels turn them in their
  // packing, not a pass of their own.
  const Tensor K = split_heads(W_k->forward(keys), num_kv_heads);
  const Tensor V = split_heads(W_v->forward(values), num_kv_heads);
  RelativePositions pos = positions;
  pos.rotary_keys = rotary;
  return attend(queries, K, V, valid_lens, causal, Tensor(), pos);
}

}  // namespace attn::nn
