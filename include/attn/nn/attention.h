// attn/nn/attention.h — the chapter's attention scoring functions and
// multi-head attention, with d2l's semantics and shapes.
//
// Layout is batch-first: queries (B, Q, query_size), keys (B, K, key_size),
// values (B, K, value_size); outputs (B, Q, value_size or num_hiddens).
//
// Masks follow d2l exactly. `valid_lens` is undefined (no mask), of shape (B)
// — every query of batch element b sees the first valid_lens[b] keys — or of
// shape (B, Q) — query q of element b sees the first valid_lens[b, q] keys.
// Masked scores are set to -1e6 before the softmax, so a row whose valid
// length is 0 becomes uniform (1/K), never NaN. Causal masking in the
// Transformer decoder is d2l's dec_valid_lens = [1, 2, ..., T] for every row.
// valid_lens may be any dtype; values must lie in [0, K].
//
// Fused or materialized. DotProductAttention (and so MultiHeadAttention and
// the Transformer) runs the fused kernel of ops/attention.h, which never
// stores the (Q x K) weights. Where the weights are wanted — pictures, tests,
// the chapter's demos — a KeepAttentionWeights guard switches the same
// modules to the materialized reference path for as long as it lives; the
// modules then record `attention_weights` after every forward. Both paths
// give the same outputs, gradients and dropout masks (tested).
#pragma once

#include "attn/nn/layers.h"

namespace attn::nn {

// While an instance lives, attention modules on this thread take the
// materialized path and keep their attention weights (nests; thread-local).
class KeepAttentionWeights {
 public:
  KeepAttentionWeights();
  ~KeepAttentionWeights();
  KeepAttentionWeights(const KeepAttentionWeights&) = delete;
  KeepAttentionWeights& operator=(const KeepAttentionWeights&) = delete;
};
// True inside a KeepAttentionWeights scope.
bool attention_weights_kept();

// softmax over the last dim of X (B, Q, K) with keys k >= valid_len masked.
Tensor masked_softmax(const Tensor& X, const Tensor& valid_lens);

// Additive (Bahdanau) attention: score(q, k) = w_v^T tanh(W_q q + W_k k).
// Parameters W_q.weight (num_hiddens, query_size), W_k.weight
// (num_hiddens, key_size), w_v.weight (1, num_hiddens), no biases.
class AdditiveAttention : public Module {
 public:
  AdditiveAttention(std::int64_t key_size, std::int64_t query_size, std::int64_t num_hiddens,
                    double dropout);
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                 const Tensor& valid_lens = Tensor());

  std::shared_ptr<Linear> W_k, W_q, w_v;
  std::shared_ptr<Dropout> dropout;
  Tensor attention_weights;  // (B, Q, K), before dropout, detached
};

// Scaled dot-product attention: softmax(Q K^T / sqrt(d)) V.
// queries (B, Q, d), keys (B, K, d), values (B, K, v) -> (B, Q, v); or the
// heads layout of ops/attention.h: (B, Q, H, d), (B, K, H, d), (B, K, H, v)
// -> (B, Q, H, v) with valid_lens per batch element, shared by the heads.
// `causal`: query q also sees only keys k < q + 1 + (K - Q) (d2l's
// dec_valid_lens when Q == K; combined with valid_lens by the minimum).
// The fused path is ops' scaled_dot_product_attention, which picks its kernel
// (without grad and dropout and with few queries, as when decoding against a
// KV cache, the decode kernel). `kv_rows` (heads layout only; (B) or (B, K)
// integers, or undefined): batch row b of the queries attends row kv_rows[b]
// of keys and values (or, per key, key c of row kv_rows[b, c]), as
// AttentionOptions::kv_rows.
// Relative positions of one attention call (self-attention; see
// AttentionOptions in ops/attention.h): `bias` (heads, 2K - 1) added to the
// scores by the query minus key distance, `query_start` ((B) integers) the
// position of each batch row's first query, undefined meaning K - Q (the
// queries are the last of the keys), and which of queries and keys rotary
// turns. All may be left out.
struct RelativePositions {
  Tensor bias;
  Tensor query_start;
  // Rotary, turned inside the kernels (AttentionOptions::rotary_queries).
  bool rotary_queries = false, rotary_keys = false;
};

class DotProductAttention : public Module {
 public:
  explicit DotProductAttention(double dropout);
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                 const Tensor& valid_lens = Tensor(), bool causal = false,
                 const Tensor& kv_rows = Tensor(), const RelativePositions& positions = {});

  std::shared_ptr<Dropout> dropout;
  // (B, Q, K) — (B * H, Q, K) in the heads layout —, before dropout,
  // detached; recorded only inside a KeepAttentionWeights scope, else undefined.
  Tensor attention_weights;
};

// (B, T, num_hiddens) -> (B * num_heads, T, num_hiddens / num_heads): head i
// of batch element b lands at row b * num_heads + i (d2l's transpose_qkv).
Tensor transpose_qkv(const Tensor& X, std::int64_t num_heads);
// The inverse: (B * num_heads, T, d) -> (B, T, num_heads * d) (d2l's transpose_output).
Tensor transpose_output(const Tensor& X, std::int64_t num_heads);

// Multi-head attention (d2l): project queries, keys and values with W_q, W_k,
// W_v to num_hiddens, split into num_heads heads, run DotProductAttention on
// all heads at once with valid_lens repeated per head (b0 x h, b1 x h, ...),
// concatenate and project with W_o. Output (B, Q, num_hiddens).
// Beyond d2l: `num_kv_heads` (0: num_heads; else a divisor of it) projects
// keys and values to that many heads of the same size, each shared by
// num_heads / num_kv_heads query heads (grouped-query attention; 1:
// multi-query), which shrinks a decoding cache by as much; `rotary` turns
// queries and keys by their positions: in forward() both inside the
// attention kernels; for a cache, keys at key_start + t when project_kv
// projects them (rotary_heads, ops/positions.h), and attend() turns the
// queries inside the kernels where RelativePositions puts them.
// The heads are views: a projection (B, T, num_hiddens) is read as
// (B, T, num_heads, num_hiddens / num_heads), which is d2l's split without
// its transposing copies, and the per-head repetition of valid_lens is
// implicit; the weights kept are d2l's (B * num_heads, Q, K).
class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(std::int64_t key_size, std::int64_t query_size, std::int64_t value_size,
                     std::int64_t num_hiddens, std::int64_t num_heads, double dropout,
                     bool bias = false, std::int64_t num_kv_heads = 0);
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                 const Tensor& valid_lens = Tensor(), bool causal = false,
                 const RelativePositions& positions = {});

  // The two halves of forward, for decoding with a cache: project keys and
  // values once into heads (B, K, num_heads, num_hiddens / num_heads), then
  // attend with any number of queries against them (K and V may be views of
  // a larger cache buffer). valid_lens is per batch element, (B) or (B, Q).
  // kv_rows ((B) or (B, K) integers, or undefined): query row b attends row
  // kv_rows[b] of K and V (beams sharing their sentence's encoder side), or
  // key c of row kv_rows[b, c] (beams sharing their prefix's cache).
  // key_start ((B) integers, or undefined: 0): the keys' first position, for rotary.
  std::pair<Tensor, Tensor> project_kv(const Tensor& keys, const Tensor& values,
                                       const Tensor& key_start = Tensor());
  Tensor attend(const Tensor& queries, const Tensor& K, const Tensor& V,
                const Tensor& valid_lens = Tensor(), bool causal = false,
                const Tensor& kv_rows = Tensor(), const RelativePositions& positions = {});

  // (B * num_heads, Q, K) weights of the last forward, detached (kept only
  // inside a KeepAttentionWeights scope).
  const Tensor& attention_weights() const { return attention->attention_weights; }

  std::int64_t num_hiddens, num_heads, num_kv_heads;
  bool rotary = false;
  std::shared_ptr<DotProductAttention> attention;
  std::shared_ptr<Linear> W_q, W_k, W_v, W_o;
};

}  // namespace attn::nn
