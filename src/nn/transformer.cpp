#include "attn/nn/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attn/autograd/node.h"

#include "attn/ops/dropout.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/index.h"
#include "attn/ops/matmul.h"
#include "attn/ops/norm.h"
#include "attn/ops/positions.h"
#include "nn/config_check.h"

namespace attn::nn {

void TransformerConfig::validate() const {
  // num_hiddens % num_heads: MultiHeadAttention's own check.
  detail::check_config("Transformer",
                       {{"src_vocab_size", src_vocab_size},
                        {"tgt_vocab_size", tgt_vocab_size},
                        {"num_hiddens", num_hiddens},
                        {"num_layers", num_layers},
                        {"num_heads", num_heads},
                        {"ffn_num_hiddens", ffn_num_hiddens},
                        {"max_len", max_len}},
                       dropout);
  validate_heads();
}

void TransformerConfig::validate_heads() const {
  ATTN_CHECK(num_kv_heads >= 0 && num_heads > 0 && num_heads % kv_heads() == 0, ValueError,
             "Transformer: num_kv_heads {} does not divide num_heads {}", num_kv_heads, num_heads);
  ATTN_CHECK(positions != Positions::rotary || num_heads <= 0 || num_hiddens / num_heads % 2 == 0,
             ValueError,
             "Transformer: rotary positions turn pairs of a head's dimensions, but a head has "
             "{} (num_hiddens {} / num_heads {})",
             num_hiddens / num_heads, num_hiddens, num_heads);
}

PositionWiseFFN::PositionWiseFFN(std::int64_t in, std::int64_t hidden, std::int64_t out) {
  dense1 = register_module("dense1", std::make_shared<Linear>(in, hidden));
  dense2 = register_module("dense2", std::make_shared<Linear>(hidden, out));
}

Tensor PositionWiseFFN::forward(const Tensor& X) {
  // relu(dense1(X)) in one op (ops linear_relu), the same numbers as d2l's two.
  return dense2->forward(dense1->forward_relu(X));
}

AddNorm::AddNorm(Shape normalized_shape, double p) {
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  ln = register_module("ln", std::make_shared<LayerNorm>(std::move(normalized_shape)));
}

Tensor AddNorm::forward(const Tensor& X, const Tensor& Y) {
  // ln(dropout(Y) + X) in one op: the same numbers and dropout mask.
  if (ln->normalized_shape.size() == 1 && X.dim() >= 1 && X.size(-1) == ln->normalized_shape[0])
    return dropout_add_layer_norm(X, Y, dropout->p, dropout->is_training(), default_generator(),
                                  ln->weight, ln->bias, ln->eps);
  return ln->forward(dropout_add(X, Y, dropout->p, dropout->is_training()));
}

EncoderBlock::EncoderBlock(std::int64_t key_size, std::int64_t query_size, std::int64_t value_size,
                           std::int64_t num_hiddens, Shape norm_shape, std::int64_t ffn_num_input,
                           std::int64_t ffn_num_hiddens, std::int64_t num_heads, double dropout,
                           bool use_bias, std::int64_t num_kv_heads, bool rotary) {
  attention = register_module("attention", std::make_shared<MultiHeadAttention>(
                                               key_size, query_size, value_size, num_hiddens,
                                               num_heads, dropout, use_bias, num_kv_heads));
  attention->rotary = rotary;
  addnorm1 = register_module("addnorm1", std::make_shared<AddNorm>(norm_shape, dropout));
  ffn = register_module(
      "ffn", std::make_shared<PositionWiseFFN>(ffn_num_input, ffn_num_hiddens, num_hiddens));
  addnorm2 = register_module("addnorm2", std::make_shared<AddNorm>(norm_shape, dropout));
}

Tensor EncoderBlock::forward(const Tensor& X, const Tensor& valid_lens,
                             const RelativePositions& positions) {
  Tensor Y = addnorm1->forward(X, attention->forward(X, X, X, valid_lens, false, positions));
  return addnorm2->forward(Y, ffn->forward(Y));
}

template <class Block>
TransformerStack<Block>::TransformerStack(const TransformerConfig& c, std::int64_t vocab_size,
                                          bool causal)
    : num_hiddens(c.num_hiddens), num_heads(c.num_heads), positions(c.positions) {
  c.validate();
  embedding = register_module("embedding", std::make_shared<Embedding>(vocab_size, c.num_hiddens));
  pos_encoding = register_module(
      "pos_encoding", std::make_shared<PositionalEncoding>(c.num_hiddens, c.dropout, c.max_len));
  if (c.positions == Positions::learned)
    learned_pos = register_module("learned_pos", std::make_shared<LearnedPositionalEncoding>(
                                                     c.num_hiddens, c.dropout, c.max_len));
  if (c.positions == Positions::relative)
    relative_bias = register_module("relative_bias",
                                    std::make_shared<RelativePositionBias>(c.num_heads, !causal));
  blks = register_module("blks", std::make_shared<Blocks<Block>>());
}

template <class Block>
Tensor TransformerStack<Block>::embed(const Tensor& X, std::int64_t start) {
  ATTN_CHECK(X.dim() == 2, ShapeError, "Transformer: expected token ids (batch, steps), got {}",
             shape_str(X.shape()));
  Tensor E = mul(embedding->forward(X), std::sqrt(static_cast<double>(num_hiddens)));
  if (positions == Positions::sinusoidal) return pos_encoding->forward(E, start);
  if (positions == Positions::learned) return learned_pos->forward(E, start);
  // Relative positions: nothing added; the same limit on positions.
  ATTN_CHECK(start >= 0 && start + X.size(1) <= pos_encoding->max_len, ValueError,
             "Transformer: positions {}..{} exceed max_len {}", start, start + X.size(1) - 1,
             pos_encoding->max_len);
  return pos_encoding->dropout->forward(E);
}

template <class Block>
RelativePositions TransformerStack<Block>::self_positions(std::int64_t K, DType dtype,
                                                          const Tensor& query_start) {
  RelativePositions p;
  p.query_start = query_start;
  if (positions == Positions::alibi) p.bias = alibi_bias_kept(num_heads, K, dtype);
  if (positions == Positions::relative) {
    p.bias = relative_bias->forward(K);
    if (p.bias.dtype() != dtype) p.bias = p.bias.to(dtype);
  }
  return p;
}

template class TransformerStack<EncoderBlock>;
template class TransformerStack<DecoderBlock>;

TransformerEncoder::TransformerEncoder(const TransformerConfig& c)
    : TransformerStack(c, c.src_vocab_size, /*causal=*/false) {
  for (std::int64_t i = 0; i < c.num_layers; ++i)
    blks->append(std::make_shared<EncoderBlock>(c.num_hiddens, c.num_hiddens, c.num_hiddens,
                                                c.num_hiddens, c.layer_norm_shape(), c.num_hiddens,
                                                c.ffn_num_hiddens, c.num_heads, c.dropout,
                                                c.use_bias, c.kv_heads(), rotary()));
}

Tensor TransformerEncoder::forward(const Tensor& X, const Tensor& valid_lens) {
  Tensor H = embed(X, 0);
  const RelativePositions pos = self_positions(X.size(1), H.dtype());
  for (auto& blk : blks->blocks) H = blk->forward(H, valid_lens, pos);
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
                           std::int64_t i_, std::int64_t num_kv_heads, bool rotary)
    : i(i_) {
  attention1 = register_module("attention1", std::make_shared<MultiHeadAttention>(
                                                 key_size, query_size, value_size, num_hiddens,
                                                 num_heads, dropout, false, num_kv_heads));
  attention1->rotary = rotary;
  addnorm1 = register_module("addnorm1", std::make_shared<AddNorm>(norm_shape, dropout));
  attention2 = register_module("attention2", std::make_shared<MultiHeadAttention>(
                                                 key_size, query_size, value_size, num_hiddens,
                                                 num_heads, dropout, false, num_kv_heads));
  addnorm2 = register_module("addnorm2", std::make_shared<AddNorm>(norm_shape, dropout));
  ffn = register_module(
      "ffn", std::make_shared<PositionWiseFFN>(ffn_num_input, ffn_num_hiddens, num_hiddens));
  addnorm3 = register_module("addnorm3", std::make_shared<AddNorm>(norm_shape, dropout));
}

Tensor DecoderBlock::forward(const Tensor& X, const Tensor& enc_outputs,
                             const Tensor& enc_valid_lens, const RelativePositions& positions) {
  // d2l's dec_valid_lens = arange(1, T + 1).repeat(B, 1): token t sees tokens 0..t.
  Tensor Y =
      addnorm1->forward(X, attention1->forward(X, X, X, Tensor(), /*causal=*/true, positions));
  Tensor Z = addnorm2->forward(Y, attention2->forward(Y, enc_outputs, enc_outputs, enc_valid_lens));
  return addnorm3->forward(Z, ffn->forward(Z));
}

namespace {
// Writes x (R, T, H, d) at steps len..len+T-1 of rows 0..R-1 of the cache
// buffer `buf` (rows, capacity, H, d), which holds `len` steps; grows it
// geometrically in steps and to at least R rows (the valid steps of every
// old row kept in place); returns the view of every row's len + T steps.
Tensor append_to_cache(Tensor& buf, const Tensor& x, std::int64_t len) {
  const std::int64_t R = x.size(0), T = x.size(1);
  const std::int64_t rows = buf.defined() ? buf.size(0) : 0;
  if (!buf.defined() || len + T > buf.size(1) || R > rows) {
    const std::int64_t old = buf.defined() ? buf.size(1) : 0;
    const std::int64_t capacity =
        len + T > old ? std::max({len + T, 2 * old, std::int64_t{16}}) : old;
    Tensor grown = Tensor::empty({std::max(R, rows), capacity, x.size(2), x.size(3)}, x.dtype());
    if (len > 0) copy_(grown.narrow(0, 0, rows).narrow(1, 0, len), buf.narrow(1, 0, len));
    buf = grown;
  }
  copy_(buf.narrow(0, 0, R).narrow(1, len, T), x);
  return buf.narrow(1, 0, len + T);
}
}  // namespace

Tensor DecoderBlock::forward_cached(const Tensor& X, DecoderState& state, const Tensor& cross_lens,
                                    const RelativePositions& positions) {
  auto [k, v] = attention1->project_kv(
      X, X,
      attention1->rotary ? full({X.size(0)}, static_cast<double>(state.steps), DType::i64)
                         : Tensor());
  Tensor K = append_to_cache(state.self_k[i], k, state.steps);
  Tensor V = append_to_cache(state.self_v[i], v, state.steps);
  // The new tokens sit at positions steps..steps+T-1: each sees the cache and
  // the new tokens up to itself (causal with offset K - T), each step of
  // each row read from the buffer row state.self_rows names.
  Tensor Y = addnorm1->forward(
      X, attention1->attend(X, K, V, Tensor(), /*causal=*/true, state.self_rows, positions));
  if (!state.cross_k[i].defined()) {
    auto [ck, cv] = attention2->project_kv(state.enc_outputs, state.enc_outputs);
    state.cross_k[i] = ck;
    state.cross_v[i] = cv;
  }
  // The encoder side is read through state.encoder_index (rows of the
  // sentences, not of the beams) once select_rows has set it.
  Tensor Z = addnorm2->forward(Y, attention2->attend(Y, state.cross_k[i], state.cross_v[i],
                                                     cross_lens, false, state.encoder_index));
  return addnorm3->forward(Z, ffn->forward(Z));
}

TransformerDecoder::TransformerDecoder(const TransformerConfig& c)
    : TransformerStack(c, c.tgt_vocab_size, /*causal=*/true), num_layers(c.num_layers) {
  for (std::int64_t i = 0; i < c.num_layers; ++i)
    blks->append(std::make_shared<DecoderBlock>(
        c.num_hiddens, c.num_hiddens, c.num_hiddens, c.num_hiddens, c.layer_norm_shape(),
        c.num_hiddens, c.ffn_num_hiddens, c.num_heads, c.dropout, i, c.kv_heads(), rotary()));
  dense = register_module("dense", std::make_shared<Linear>(c.num_hiddens, c.tgt_vocab_size));
}

DecoderState TransformerDecoder::init_state(const Tensor& enc_outputs,
                                            const Tensor& enc_valid_lens) const {
  DecoderState s;
  s.enc_outputs = enc_outputs;
  s.enc_valid_lens = enc_valid_lens;
  s.shares_encoder_rows = true;
  s.self_rows = Tensor::empty({enc_outputs.size(0), 0}, DType::i64);
  s.self_k.resize(num_layers);
  s.self_v.resize(num_layers);
  s.cross_k.resize(num_layers);
  s.cross_v.resize(num_layers);
  return s;
}

Tensor TransformerDecoder::forward(const Tensor& X, const DecoderState& state) {
  Tensor H = embed(X, 0);
  Tensor enc = state.enc_outputs, lens = state.enc_valid_lens;
  if (state.encoder_index.defined()) {  // rows selected: the encoder side of each
    enc = index_select(enc, 0, state.encoder_index);
    if (lens.defined()) lens = index_select(lens, 0, state.encoder_index);
  }
  const RelativePositions pos = self_positions(X.size(1), H.dtype());
  for (auto& blk : blks->blocks) H = blk->forward(H, enc, lens, pos);
  return dense->forward(H);
}

namespace {
// state.self_rows with T more steps, each row's own: (R, steps + T).
void extend_cache_table(DecoderState& state, std::int64_t R, std::int64_t T) {
  const Tensor& old = state.self_rows;
  const std::int64_t S = state.steps;
  ATTN_CHECK(old.defined() && old.dim() == 2 && old.size(0) == R && old.size(1) == S, ShapeError,
             "TransformerDecoder::step: a state whose table of cache rows has shape {} for {} "
             "rows and {} steps (a state from init_state, changed only by step and select_rows)",
             old.defined() ? shape_str(old.shape()) : std::string("undefined"), R, S);
  Tensor table = Tensor::empty({R, S + T}, DType::i64);
  const Tensor src = old.contiguous();
  const std::int64_t* o = src.data<std::int64_t>();
  std::int64_t* t = table.data<std::int64_t>();
  for (std::int64_t r = 0; r < R; ++r) {
    std::copy(o + r * S, o + (r + 1) * S, t + r * (S + T));
    std::fill(t + r * (S + T) + S, t + (r + 1) * (S + T), r);
  }
  state.self_rows = table;
}
}  // namespace

Tensor TransformerDecoder::step(const Tensor& X, DecoderState& state) {
  autograd::NoGradGuard no_grad;
  return dense->forward(step_hidden(X, state));
}

Tensor TransformerDecoder::step_argmax(const Tensor& X, DecoderState& state) {
  autograd::NoGradGuard no_grad;
  return linear_argmax(step_hidden(X, state), dense->weight, dense->bias);
}

Tensor TransformerDecoder::step_hidden(const Tensor& X, DecoderState& state) {
  autograd::NoGradGuard no_grad;  // the cache is written in place: inference only
  // The new tokens sit at positions steps, steps + 1, ... (d2l adds position
  // 0's encoding at every inference step; see docs/design/d2l.md).
  Tensor H = embed(X, state.steps);
  const Tensor& rows = state.encoder_index;
  const Tensor cross_lens = rows.defined() && state.enc_valid_lens.defined()
                                ? index_select(state.enc_valid_lens, 0, rows)
                                : state.enc_valid_lens;
  extend_cache_table(state, X.size(0), X.size(1));
  const RelativePositions pos = self_positions(state.steps + X.size(1), H.dtype());
  for (auto& blk : blks->blocks) H = blk->forward_cached(H, state, cross_lens, pos);
  state.steps += X.size(1);
  return H;
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
  const std::int64_t kv = c.kv_heads() * (H / c.num_heads);  // W_k's and W_v's outputs
  auto attention = [&](const std::string& name, bool bias) {
    for (const char* w : {"W_q", "W_k", "W_v", "W_o"})
      linear(name + "." + w, H, w[2] == 'k' || w[2] == 'v' ? kv : H, bias);
  };
  auto positions = [&](const std::string& stack) {
    if (c.positions == Positions::learned) add(stack + ".learned_pos.P", {1, c.max_len, H});
    if (c.positions == Positions::relative) add(stack + ".relative_bias.weight", {c.num_heads, 32});
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
  positions("encoder");
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    const std::string b = "encoder.blks.block" + std::to_string(i);
    attention(b + ".attention", c.use_bias);
    addnorm(b + ".addnorm1");
    ffn(b + ".ffn");
    addnorm(b + ".addnorm2");
  }
  add("decoder.embedding.weight", {c.tgt_vocab_size, H});
  positions("decoder");
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

DecoderState EncoderDecoder::begin(const Tensor& enc_X, const Tensor& enc_valid_lens) {
  return decoder->init_state(encoder->forward(enc_X, enc_valid_lens), enc_valid_lens);
}

Tensor EncoderDecoder::decode(const Tensor& dec_X, const DecoderState& state) {
  return decoder->forward(dec_X, state);
}

Tensor EncoderDecoder::step(const Tensor& X, DecoderState& state) {
  return decoder->step(X, state);
}

Tensor EncoderDecoder::step_argmax(const Tensor& X, DecoderState& state) {
  return decoder->step_argmax(X, state);
}

AttentionWeights EncoderDecoder::attention_weights() const {
  auto dec = decoder->attention_weights();
  return {encoder->attention_weights(), dec[0], dec[1]};
}

}  // namespace attn::nn
