#include "attn/nn/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attn/autograd/node.h"

#include "attn/ops/dropout.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/index.h"

namespace attn::nn {

void TransformerConfig::validate() const {
  auto positive = [](std::int64_t v, const char* name) {
    ATTN_CHECK(v > 0, ValueError, "Transformer: {} must be positive, got {}", name, v);
  };
  positive(src_vocab_size, "src_vocab_size");
  positive(tgt_vocab_size, "tgt_vocab_size");
  positive(num_hiddens, "num_hiddens");
  positive(num_layers, "num_layers");
  positive(num_heads, "num_heads");
  positive(ffn_num_hiddens, "ffn_num_hiddens");
  positive(max_len, "max_len");
  // num_hiddens % num_heads: MultiHeadAttention's own check.
  ATTN_CHECK(dropout >= 0 && dropout < 1, ValueError,
             "Transformer: dropout must be in [0, 1), got {}", dropout);
}

PositionWiseFFN::PositionWiseFFN(std::int64_t in, std::int64_t hidden, std::int64_t out) {
  dense1 = register_module("dense1", std::make_shared<Linear>(in, hidden));
  dense2 = register_module("dense2", std::make_shared<Linear>(hidden, out));
}

Tensor PositionWiseFFN::forward(const Tensor& X) {
  return dense2->forward(relu(dense1->forward(X)));
}

AddNorm::AddNorm(Shape normalized_shape, double p) {
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  ln = register_module("ln", std::make_shared<LayerNorm>(std::move(normalized_shape)));
}

Tensor AddNorm::forward(const Tensor& X, const Tensor& Y) {
  // add(dropout(Y), X) in one pass: the same numbers and dropout mask.
  return ln->forward(dropout_add(X, Y, dropout->p, dropout->is_training()));
}

EncoderBlock::EncoderBlock(std::int64_t key_size, std::int64_t query_size, std::int64_t value_size,
                           std::int64_t num_hiddens, Shape norm_shape, std::int64_t ffn_num_input,
                           std::int64_t ffn_num_hiddens, std::int64_t num_heads, double dropout,
                           bool use_bias) {
  attention = register_module(
      "attention", std::make_shared<MultiHeadAttention>(key_size, query_size, value_size,
                                                        num_hiddens, num_heads, dropout, use_bias));
  addnorm1 = register_module("addnorm1", std::make_shared<AddNorm>(norm_shape, dropout));
  ffn = register_module(
      "ffn", std::make_shared<PositionWiseFFN>(ffn_num_input, ffn_num_hiddens, num_hiddens));
  addnorm2 = register_module("addnorm2", std::make_shared<AddNorm>(norm_shape, dropout));
}

Tensor EncoderBlock::forward(const Tensor& X, const Tensor& valid_lens) {
  Tensor Y = addnorm1->forward(X, attention->forward(X, X, X, valid_lens));
  return addnorm2->forward(Y, ffn->forward(Y));
}

namespace {
// embedding(X) * sqrt(num_hiddens), then the positional encoding from `start`.
Tensor embed(Embedding& emb, PositionalEncoding& pe, const Tensor& X, std::int64_t num_hiddens,
             std::int64_t start) {
  ATTN_CHECK(X.dim() == 2, ShapeError, "Transformer: expected token ids (batch, steps), got {}",
             shape_str(X.shape()));
  return pe.forward(mul(emb.forward(X), std::sqrt(static_cast<double>(num_hiddens))), start);
}
}  // namespace

TransformerEncoder::TransformerEncoder(const TransformerConfig& c) : num_hiddens(c.num_hiddens) {
  c.validate();
  embedding =
      register_module("embedding", std::make_shared<Embedding>(c.src_vocab_size, c.num_hiddens));
  pos_encoding = register_module(
      "pos_encoding", std::make_shared<PositionalEncoding>(c.num_hiddens, c.dropout, c.max_len));
  blks = register_module("blks", std::make_shared<Blocks<EncoderBlock>>());
  for (std::int64_t i = 0; i < c.num_layers; ++i)
    blks->append(std::make_shared<EncoderBlock>(
        c.num_hiddens, c.num_hiddens, c.num_hiddens, c.num_hiddens, c.layer_norm_shape(),
        c.num_hiddens, c.ffn_num_hiddens, c.num_heads, c.dropout, c.use_bias));
}

Tensor TransformerEncoder::forward(const Tensor& X, const Tensor& valid_lens) {
  Tensor H = embed(*embedding, *pos_encoding, X, num_hiddens, 0);
  for (auto& blk : blks->blocks) H = blk->forward(H, valid_lens);
  return H;
}

std::vector<Tensor> TransformerEncoder::attention_weights() const {
  std::vector<Tensor> out;
  for (auto& blk : blks->blocks) out.push_back(blk->attention->attention_weights());
  return out;
}

DecoderBlock::DecoderBlock(std::int64_t key_size, std::int64_t query_size, std::int64_t value_size,
                           std::int64_t num_hiddens, Shape norm_shape, std::int64_t ffn_num_input,
                           std::int64_t ffn_num_hiddens, std::int64_t num_heads, double dropout,
                           std::int64_t i_)
    : i(i_) {
  attention1 = register_module(
      "attention1", std::make_shared<MultiHeadAttention>(key_size, query_size, value_size,
                                                         num_hiddens, num_heads, dropout));
  addnorm1 = register_module("addnorm1", std::make_shared<AddNorm>(norm_shape, dropout));
  attention2 = register_module(
      "attention2", std::make_shared<MultiHeadAttention>(key_size, query_size, value_size,
                                                         num_hiddens, num_heads, dropout));
  addnorm2 = register_module("addnorm2", std::make_shared<AddNorm>(norm_shape, dropout));
  ffn = register_module(
      "ffn", std::make_shared<PositionWiseFFN>(ffn_num_input, ffn_num_hiddens, num_hiddens));
  addnorm3 = register_module("addnorm3", std::make_shared<AddNorm>(norm_shape, dropout));
}

Tensor DecoderBlock::forward(const Tensor& X, const Tensor& enc_outputs,
                             const Tensor& enc_valid_lens) {
  // d2l's dec_valid_lens = arange(1, T + 1).repeat(B, 1): token t sees tokens 0..t.
  Tensor Y = addnorm1->forward(X, attention1->forward(X, X, X, Tensor(), /*causal=*/true));
  Tensor Z = addnorm2->forward(Y, attention2->forward(Y, enc_outputs, enc_outputs, enc_valid_lens));
  return addnorm3->forward(Z, ffn->forward(Z));
}

namespace {
// Appends x (B, T, H, d) to the cache buffer `buf` (B, capacity, H, d) that
// holds `len` steps, growing it geometrically; returns the view of the
// len + T valid steps.
Tensor append_to_cache(Tensor& buf, const Tensor& x, std::int64_t len) {
  const std::int64_t T = x.size(1);
  if (!buf.defined() || len + T > buf.size(1)) {
    const std::int64_t old = buf.defined() ? buf.size(1) : 0;
    const std::int64_t capacity = std::max({len + T, 2 * old, std::int64_t{16}});
    Tensor grown = Tensor::empty({x.size(0), capacity, x.size(2), x.size(3)}, x.dtype());
    if (len > 0) copy_(grown.narrow(1, 0, len), buf.narrow(1, 0, len));
    buf = grown;
  }
  copy_(buf.narrow(1, len, T), x);
  return buf.narrow(1, 0, len + T);
}
}  // namespace

namespace {

// Rows `index` of t (rows along dim 0), of which only the first `keep`
// elements of each row matter (a cache buffer's valid steps). When `own`
// (t's memory is the state's alone), t is contiguous and has at least as many
// rows, they are gathered in t's own memory and its first index.size() rows
// returned: no allocation, no fresh pages. A compaction (index non-decreasing
// with index[i] >= i, as when sentences leave the batch) is copied forward in
// place, rows that stay where they are not at all; any other order goes
// through a scratch buffer, since a row may be read after its place was
// written. Otherwise the rows go to a new tensor.
Tensor select_leading_rows(const Tensor& t, const std::vector<std::int64_t>& index,
                           std::int64_t keep, bool own) {
  const std::int64_t n = static_cast<std::int64_t>(index.size());
  if (!t.is_contiguous()) return index_select(t, 0, from_vector(index, {n}));
  const std::size_t esize = dtype_size(t.dtype());
  const std::size_t stride =
      static_cast<std::size_t>(t.numel() / std::max<std::int64_t>(t.size(0), 1)) * esize;
  const std::size_t bytes = static_cast<std::size_t>(keep) * esize;
  char* data = static_cast<char*>(t.raw_data());
  auto row = [&](char* base, std::int64_t r) {
    return base + static_cast<std::size_t>(r) * stride;
  };
  if (own && n <= t.size(0)) {
    bool forward = true;
    for (std::int64_t i = 0; i < n && forward; ++i)
      forward = index[i] >= i && (i == 0 || index[i] >= index[i - 1]);
    if (forward) {
      for (std::int64_t i = 0; i < n; ++i)
        if (index[i] != i) std::memcpy(row(data, i), row(data, index[i]), bytes);
    } else {
      thread_local std::vector<char> scratch;
      scratch.resize(index.size() * bytes);
      for (std::int64_t i = 0; i < n; ++i)
        std::memcpy(scratch.data() + i * bytes, row(data, index[i]), bytes);
      for (std::int64_t i = 0; i < n; ++i)
        std::memcpy(row(data, i), scratch.data() + i * bytes, bytes);
    }
    return t.narrow(0, 0, n);
  }
  Shape shape = t.shape();
  shape[0] = n;
  Tensor out = Tensor::empty(shape, t.dtype());
  char* dst = static_cast<char*>(out.raw_data());
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(row(dst, i), row(data, index[i]), bytes);
  return out;
}

std::vector<std::int64_t> row_index(const Tensor& rows, std::int64_t B, const char* what) {
  ATTN_CHECK(rows.defined() && rows.dim() == 1 && !is_floating(rows.dtype()), ValueError,
             "DecoderState::select_rows: expected a 1-D integer index of {}, got {}", what,
             rows.defined()
                 ? fmt::format("{} {}", dtype_name(rows.dtype()), shape_str(rows.shape()))
                 : std::string("an undefined tensor"));
  std::vector<std::int64_t> index = to_vector<std::int64_t>(rows.to(DType::i64));
  for (std::int64_t r : index)
    ATTN_CHECK(r >= 0 && r < B, ValueError,
               "DecoderState::select_rows: {} {} is out of range for a batch of {}", what, r, B);
  return index;
}

}  // namespace

void DecoderState::select_rows(const Tensor& rows, const Tensor& encoder_rows) {
  const std::int64_t B = batch_size();
  const std::vector<std::int64_t> index = row_index(rows, B, "rows");
  const std::vector<std::int64_t> enc_index =
      encoder_rows.defined() ? row_index(encoder_rows, B, "encoder rows") : index;
  ATTN_CHECK(enc_index.size() == index.size(), ValueError,
             "DecoderState::select_rows: {} encoder rows for {} rows", enc_index.size(),
             index.size());
  // The self-attention buffers are the state's own (step() writes them in
  // place); only their valid steps are kept.
  for (auto* cache : {&self_k, &self_v})
    for (Tensor& buf : *cache)
      if (buf.defined()) {
        ATTN_CHECK(buf.dim() == 4 && steps <= buf.size(1), ShapeError,
                   "DecoderState::select_rows: a self-attention cache of shape {} for {} steps",
                   shape_str(buf.shape()), steps);
        buf = select_leading_rows(buf, index, steps * buf.size(2) * buf.size(3), true);
      }
  // The cross-attention keys and values are the state's own; enc_outputs and
  // enc_valid_lens are the caller's until a first selection copies them.
  auto whole_row = [](const Tensor& t) { return t.numel() / std::max<std::int64_t>(t.size(0), 1); };
  for (auto* cache : {&cross_k, &cross_v})
    for (Tensor& t : *cache)
      if (t.defined()) t = select_leading_rows(t, enc_index, whole_row(t), true);
  bool identity = enc_index.size() == static_cast<std::size_t>(B);
  for (std::size_t i = 0; identity && i < enc_index.size(); ++i)
    identity = enc_index[i] == static_cast<std::int64_t>(i);
  if (identity) return;  // the caller's tensors stay as they are
  for (Tensor* t : {&enc_outputs, &enc_valid_lens})
    if (t->defined()) *t = select_leading_rows(*t, enc_index, whole_row(*t), owns_encoder_rows);
  owns_encoder_rows = true;
}

Tensor DecoderBlock::forward_cached(const Tensor& X, DecoderState& state) {
  auto [k, v] = attention1->project_kv(X, X);
  Tensor K = append_to_cache(state.self_k[i], k, state.steps);
  Tensor V = append_to_cache(state.self_v[i], v, state.steps);
  // The new tokens sit at positions steps..steps+T-1: each sees the cache and
  // the new tokens up to itself (causal with offset K - T).
  Tensor Y = addnorm1->forward(X, attention1->attend(X, K, V, Tensor(), /*causal=*/true));
  if (!state.cross_k[i].defined()) {
    auto [ck, cv] = attention2->project_kv(state.enc_outputs, state.enc_outputs);
    state.cross_k[i] = ck;
    state.cross_v[i] = cv;
  }
  Tensor Z = addnorm2->forward(
      Y, attention2->attend(Y, state.cross_k[i], state.cross_v[i], state.enc_valid_lens));
  return addnorm3->forward(Z, ffn->forward(Z));
}

TransformerDecoder::TransformerDecoder(const TransformerConfig& c)
    : num_hiddens(c.num_hiddens), num_layers(c.num_layers) {
  c.validate();
  embedding =
      register_module("embedding", std::make_shared<Embedding>(c.tgt_vocab_size, c.num_hiddens));
  pos_encoding = register_module(
      "pos_encoding", std::make_shared<PositionalEncoding>(c.num_hiddens, c.dropout, c.max_len));
  blks = register_module("blks", std::make_shared<Blocks<DecoderBlock>>());
  for (std::int64_t i = 0; i < c.num_layers; ++i)
    blks->append(std::make_shared<DecoderBlock>(c.num_hiddens, c.num_hiddens, c.num_hiddens,
                                                c.num_hiddens, c.layer_norm_shape(), c.num_hiddens,
                                                c.ffn_num_hiddens, c.num_heads, c.dropout, i));
  dense = register_module("dense", std::make_shared<Linear>(c.num_hiddens, c.tgt_vocab_size));
}

DecoderState TransformerDecoder::init_state(const Tensor& enc_outputs,
                                            const Tensor& enc_valid_lens) const {
  DecoderState s;
  s.enc_outputs = enc_outputs;
  s.enc_valid_lens = enc_valid_lens;
  s.self_k.resize(num_layers);
  s.self_v.resize(num_layers);
  s.cross_k.resize(num_layers);
  s.cross_v.resize(num_layers);
  return s;
}

Tensor TransformerDecoder::forward(const Tensor& X, const DecoderState& state) {
  Tensor H = embed(*embedding, *pos_encoding, X, num_hiddens, 0);
  for (auto& blk : blks->blocks) H = blk->forward(H, state.enc_outputs, state.enc_valid_lens);
  return dense->forward(H);
}

Tensor TransformerDecoder::step(const Tensor& X, DecoderState& state) {
  autograd::NoGradGuard no_grad;  // the cache is written in place: inference only
  // The new tokens sit at positions steps, steps + 1, ... (d2l adds position
  // 0's encoding at every inference step; see docs/design.md).
  Tensor H = embed(*embedding, *pos_encoding, X, num_hiddens, state.steps);
  for (auto& blk : blks->blocks) H = blk->forward_cached(H, state);
  state.steps += X.size(1);
  return dense->forward(H);
}

std::array<std::vector<Tensor>, 2> TransformerDecoder::attention_weights() const {
  std::array<std::vector<Tensor>, 2> out;
  for (auto& blk : blks->blocks) {
    out[0].push_back(blk->attention1->attention_weights());
    out[1].push_back(blk->attention2->attention_weights());
  }
  return out;
}

std::vector<std::pair<std::string, Shape>> transformer_parameter_shapes(
    const TransformerConfig& c) {
  const std::int64_t H = c.num_hiddens, F = c.ffn_num_hiddens;
  const Shape norm = c.layer_norm_shape();
  std::vector<std::pair<std::string, Shape>> out;
  auto add = [&](std::string name, Shape shape) { out.emplace_back(std::move(name), shape); };
  auto linear = [&](const std::string& name, std::int64_t in, std::int64_t out_features,
                    bool bias) {
    add(name + ".weight", {out_features, in});
    if (bias) add(name + ".bias", {out_features});
  };
  auto attention = [&](const std::string& name, bool bias) {
    for (const char* w : {"W_q", "W_k", "W_v", "W_o"}) linear(name + "." + w, H, H, bias);
  };
  auto addnorm = [&](const std::string& name) {
    add(name + ".ln.weight", norm);
    add(name + ".ln.bias", norm);
  };
  auto ffn = [&](const std::string& name) {
    linear(name + ".dense1", H, F, true);
    linear(name + ".dense2", F, H, true);
  };
  add("encoder.embedding.weight", {c.src_vocab_size, H});
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    const std::string b = "encoder.blks.block" + std::to_string(i);
    attention(b + ".attention", c.use_bias);
    addnorm(b + ".addnorm1");
    ffn(b + ".ffn");
    addnorm(b + ".addnorm2");
  }
  add("decoder.embedding.weight", {c.tgt_vocab_size, H});
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    const std::string b = "decoder.blks.block" + std::to_string(i);
    attention(b + ".attention1", false);
    addnorm(b + ".addnorm1");
    attention(b + ".attention2", false);
    addnorm(b + ".addnorm2");
    ffn(b + ".ffn");
    addnorm(b + ".addnorm3");
  }
  linear("decoder.dense", H, c.tgt_vocab_size, true);
  return out;
}

EncoderDecoder::EncoderDecoder(const TransformerConfig& c) : config(c) {
  c.validate();
  encoder = register_module("encoder", std::make_shared<TransformerEncoder>(c));
  decoder = register_module("decoder", std::make_shared<TransformerDecoder>(c));
}

Tensor EncoderDecoder::forward(const Tensor& enc_X, const Tensor& dec_X,
                               const Tensor& enc_valid_lens) {
  Tensor enc_outputs = encoder->forward(enc_X, enc_valid_lens);
  return decoder->forward(dec_X, decoder->init_state(enc_outputs, enc_valid_lens));
}

}  // namespace attn::nn
