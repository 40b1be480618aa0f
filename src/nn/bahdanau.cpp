#include "attn/nn/bahdanau.h"

#include "attn/autograd/node.h"
#include "attn/ops/index.h"
#include "nn/config_check.h"

namespace attn::nn {

void BahdanauConfig::validate() const {
  detail::check_config("Bahdanau",
                       {{"src_vocab_size", src_vocab_size},
                        {"tgt_vocab_size", tgt_vocab_size},
                        {"embed_size", embed_size},
                        {"num_hiddens", num_hiddens},
                        {"num_layers", num_layers},
                        {"max_len", max_len}},
                       dropout);
}

Seq2SeqEncoder::Seq2SeqEncoder(std::int64_t vocab_size, std::int64_t embed_size,
                               std::int64_t num_hiddens, std::int64_t num_layers, double dropout) {
  embedding = register_module("embedding", std::make_shared<Embedding>(vocab_size, embed_size));
  rnn = register_module("rnn", std::make_shared<GRU>(embed_size, num_hiddens, num_layers, dropout));
}

GRU::Output Seq2SeqEncoder::forward(const Tensor& X) const {
  ATTN_CHECK(X.dim() == 2, ShapeError, "Seq2SeqEncoder: expected ids (B, T), got {}",
             shape_str(X.shape()));
  return rnn->forward(embedding->forward(X).permute({1, 0, 2}));
}

Seq2SeqAttentionDecoder::Seq2SeqAttentionDecoder(std::int64_t vocab_size, std::int64_t embed_size,
                                                 std::int64_t num_hiddens, std::int64_t num_layers,
                                                 double dropout) {
  attention = register_module("attention", std::make_shared<AdditiveAttention>(
                                               num_hiddens, num_hiddens, num_hiddens, dropout));
  embedding = register_module("embedding", std::make_shared<Embedding>(vocab_size, embed_size));
  rnn = register_module(
      "rnn", std::make_shared<GRU>(embed_size + num_hiddens, num_hiddens, num_layers, dropout));
  dense = register_module("dense", std::make_shared<Linear>(num_hiddens, vocab_size));
}

DecoderState Seq2SeqAttentionDecoder::init_state(const GRU::Output& encoded,
                                                 const Tensor& enc_valid_lens) const {
  DecoderState s;
  s.enc_outputs = encoded.outputs.permute({1, 0, 2}).contiguous();
  s.hidden = encoded.state;
  s.enc_valid_lens = enc_valid_lens;
  return s;
}

Tensor Seq2SeqAttentionDecoder::forward(const Tensor& X, const DecoderState& state,
                                        Tensor& hidden) {
  ATTN_CHECK(X.dim() == 2, ShapeError, "Seq2SeqAttentionDecoder: expected ids (B, T), got {}",
             shape_str(X.shape()));
  ATTN_CHECK(state.enc_outputs.defined() && hidden.defined() && hidden.dim() == 3 &&
                 hidden.size(1) == X.size(0) && state.enc_outputs.size(0) == X.size(0),
             ShapeError,
             "Seq2SeqAttentionDecoder: the state's batch does not match the {} rows of X",
             X.size(0));
  const bool keep = attention_weights_kept();
  Tensor emb = embedding->forward(X);  // (B, T, E)
  std::vector<Tensor> outputs, weights;
  for (std::int64_t t = 0; t < X.size(1); ++t) {
    Tensor query = hidden.select(0, hidden.size(0) - 1).unsqueeze(1);  // (B, 1, H)
    Tensor context =
        attention->forward(query, state.enc_outputs, state.enc_outputs, state.enc_valid_lens);
    Tensor x = cat({context, emb.narrow(1, t, 1)}, -1);  // (B, 1, H + E)
    GRU::Output o = rnn->forward(x.permute({1, 0, 2}), hidden);
    hidden = o.state;
    outputs.push_back(o.outputs);  // (1, B, H)
    if (keep) weights.push_back(attention->attention_weights);
  }
  attention_weights = keep && !weights.empty() ? cat(weights, 1) : Tensor();
  ATTN_CHECK(!outputs.empty(), ShapeError, "Seq2SeqAttentionDecoder: X has no steps");
  return dense->forward(cat(outputs, 0)).permute({1, 0, 2});
}

BahdanauEncoderDecoder::BahdanauEncoderDecoder(const BahdanauConfig& c) : config(c) {
  c.validate();
  encoder = register_module(
      "encoder", std::make_shared<Seq2SeqEncoder>(c.src_vocab_size, c.embed_size, c.num_hiddens,
                                                  c.num_layers, c.dropout));
  decoder = register_module(
      "decoder", std::make_shared<Seq2SeqAttentionDecoder>(c.tgt_vocab_size, c.embed_size,
                                                           c.num_hiddens, c.num_layers, c.dropout));
}

Tensor BahdanauEncoderDecoder::forward(const Tensor& enc_X, const Tensor& dec_X,
                                       const Tensor& enc_valid_lens) {
  return decode(dec_X, begin(enc_X, enc_valid_lens));
}

DecoderState BahdanauEncoderDecoder::begin(const Tensor& enc_X, const Tensor& enc_valid_lens) {
  return decoder->init_state(encoder->forward(enc_X), enc_valid_lens);
}

Tensor BahdanauEncoderDecoder::decode(const Tensor& dec_X, const DecoderState& state) {
  Tensor hidden = state.hidden;
  return decoder->forward(dec_X, state, hidden);
}

Tensor BahdanauEncoderDecoder::step(const Tensor& X, DecoderState& state) {
  autograd::NoGradGuard no_grad;
  Tensor logits = decoder->forward(X, state, state.hidden);
  state.steps += X.size(1);
  return logits;
}

AttentionWeights BahdanauEncoderDecoder::attention_weights() const {
  AttentionWeights w;
  if (decoder->attention_weights.defined()) w.decoder_cross.push_back(decoder->attention_weights);
  return w;
}

std::vector<std::pair<std::string, Shape>> bahdanau_parameter_shapes(const BahdanauConfig& c) {
  const std::int64_t E = c.embed_size, H = c.num_hiddens;
  std::vector<std::pair<std::string, Shape>> out;
  auto gru = [&](const std::string& name, std::int64_t input) {
    for (std::int64_t k = 0; k < c.num_layers; ++k) {
      const std::string l = "_l" + std::to_string(k);
      out.push_back({name + ".weight_ih" + l, {3 * H, k ? H : input}});
      out.push_back({name + ".weight_hh" + l, {3 * H, H}});
      out.push_back({name + ".bias_ih" + l, {3 * H}});
      out.push_back({name + ".bias_hh" + l, {3 * H}});
    }
  };
  out.push_back({"encoder.embedding.weight", {c.src_vocab_size, E}});
  gru("encoder.rnn", E);
  out.push_back({"decoder.attention.W_k.weight", {H, H}});
  out.push_back({"decoder.attention.W_q.weight", {H, H}});
  out.push_back({"decoder.attention.w_v.weight", {1, H}});
  out.push_back({"decoder.embedding.weight", {c.tgt_vocab_size, E}});
  gru("decoder.rnn", E + H);
  out.push_back({"decoder.dense.weight", {c.tgt_vocab_size, H}});
  out.push_back({"decoder.dense.bias", {c.tgt_vocab_size}});
  return out;
}

}  // namespace attn::nn
