// attn/nn/bahdanau.h — d2l's RNN encoder–decoder with Bahdanau attention
// (section 10.4, the PyTorch edition's Seq2SeqEncoder and
// Seq2SeqAttentionDecoder).
//
// Encoder: embedding (B, T) -> (B, T, E), time-major, a GRU of num_layers:
//   outputs (T, B, H), state (num_layers, B, H).
// Decoder, per target step t: the query is the last layer's hidden state
// (B, 1, H); additive attention over the encoder outputs (B, Ts, H) (keys =
// values, masked by the source valid lengths) gives the context (B, 1, H);
// [context, embedding(x_t)] (B, 1, H + E) goes through a GRU of num_layers
// from the previous state; dense maps its output to the vocabulary.
// Parameter names are d2l's state_dict: encoder.embedding.weight,
// encoder.rnn.weight_ih_l0, ..., decoder.attention.W_k.weight,
// decoder.attention.W_q.weight, decoder.attention.w_v.weight,
// decoder.embedding.weight, decoder.rnn.weight_ih_l0 ((3H, H + E)), ...,
// decoder.dense.weight, decoder.dense.bias.
#pragma once

#include "attn/nn/attention.h"
#include "attn/nn/rnn.h"
#include "attn/nn/seq2seq_model.h"

namespace attn::nn {

struct BahdanauConfig {
  std::int64_t src_vocab_size = 0, tgt_vocab_size = 0;
  std::int64_t embed_size = 32, num_hiddens = 32, num_layers = 2;
  double dropout = 0.1;
  // No positions limit the model; this caps what decoding accepts and makes
  // (as a Transformer's max_len).
  std::int64_t max_len = 1000;
  void validate() const;  // ValueError naming the first bad field
};

class Seq2SeqEncoder : public Module {
 public:
  Seq2SeqEncoder(std::int64_t vocab_size, std::int64_t embed_size, std::int64_t num_hiddens,
                 std::int64_t num_layers, double dropout = 0.0);
  // X (B, T) ids -> outputs (T, B, H), state (num_layers, B, H)
  GRU::Output forward(const Tensor& X) const;

  std::shared_ptr<Embedding> embedding;
  std::shared_ptr<GRU> rnn;
};

class Seq2SeqAttentionDecoder : public Module {
 public:
  Seq2SeqAttentionDecoder(std::int64_t vocab_size, std::int64_t embed_size,
                          std::int64_t num_hiddens, std::int64_t num_layers, double dropout = 0.0);
  // d2l's init_state: enc_outputs (B, Ts, H) (the encoder's outputs
  // permuted), hidden = the encoder's state, the source valid lengths.
  DecoderState init_state(const GRU::Output& encoded, const Tensor& enc_valid_lens) const;
  // X (B, T) target ids, one step after another from `hidden` (num_layers,
  // B, H): logits (B, T, vocab); `hidden` becomes the state after the last
  // step. The attention weights of the T steps are kept (B, T, Ts).
  Tensor forward(const Tensor& X, const DecoderState& state, Tensor& hidden);
  // (B, T, Ts) of the last forward (inside KeepAttentionWeights), else undefined.
  Tensor attention_weights;

  std::shared_ptr<AdditiveAttention> attention;
  std::shared_ptr<Embedding> embedding;
  std::shared_ptr<GRU> rnn;
  std::shared_ptr<Linear> dense;
};

class BahdanauEncoderDecoder : public Seq2SeqModel {
 public:
  explicit BahdanauEncoderDecoder(const BahdanauConfig& c);
  Tensor forward(const Tensor& enc_X, const Tensor& dec_X, const Tensor& enc_valid_lens) override;
  DecoderState begin(const Tensor& enc_X, const Tensor& enc_valid_lens) override;
  Tensor decode(const Tensor& dec_X, const DecoderState& state) override;
  Tensor step(const Tensor& X, DecoderState& state) override;
  AttentionWeights attention_weights() const override;
  std::string architecture() const override { return "bahdanau"; }
  std::int64_t tgt_vocab_size() const override { return config.tgt_vocab_size; }
  std::int64_t max_len() const override { return config.max_len; }
  std::int64_t num_heads() const override { return 1; }

  BahdanauConfig config;
  std::shared_ptr<Seq2SeqEncoder> encoder;
  std::shared_ptr<Seq2SeqAttentionDecoder> decoder;
};

// The name and shape of every parameter of BahdanauEncoderDecoder(c), in the
// order of its named_parameters(), without building it.
std::vector<std::pair<std::string, Shape>> bahdanau_parameter_shapes(const BahdanauConfig& c);

}  // namespace attn::nn
