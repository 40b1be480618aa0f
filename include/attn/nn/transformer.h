// attn/nn/transformer.h — the Transformer encoder–decoder of d2l 10.7.
//
// Shapes: token ids (B, T) i64; hidden states (B, T, num_hiddens); valid
// lengths (B). Parameter names are those of d2l's PyTorch state_dict:
//   encoder.embedding.weight, encoder.blks.block0.attention.W_q.weight,
//   encoder.blks.block0.addnorm1.ln.weight, encoder.blks.block0.ffn.dense1.bias,
//   decoder.blks.block0.attention1.W_k.weight, decoder.blks.block0.attention2...,
//   decoder.dense.weight, decoder.dense.bias, ...
// The architecture is post-LN: AddNorm(X, Y) = LayerNorm(dropout(Y) + X).
#pragma once

#include <array>

#include "attn/core/enum_names.h"
#include "attn/nn/attention.h"
#include "attn/nn/positional.h"
#include "attn/nn/seq2seq_model.h"

namespace attn::nn {

// Where the Transformer's positions come from. sinusoidal: d2l's, added to
// the embeddings (the default, and d2l's numbers); learned: a learned table
// added instead (LearnedPositionalEncoding); rotary: queries and keys of
// every self-attention turned by their positions (RoFormer); alibi: each
// self-attention head's scores biased by -slope |i - j| (Press, Smith and
// Lewis); relative: a learned bias per head over T5's buckets of i - j, one
// table per stack. The last three add nothing to the embeddings, and leave
// cross-attention without positions (its queries and keys are in different
// sentences). docs/design/positions.md says why.
enum class Positions { sinusoidal, learned, rotary, alibi, relative };

struct TransformerConfig {
  std::int64_t src_vocab_size = 0, tgt_vocab_size = 0;
  std::int64_t num_hiddens = 32;
  std::int64_t num_layers = 2;
  std::int64_t num_heads = 4;
  std::int64_t ffn_num_hiddens = 64;
  double dropout = 0.1;
  std::int64_t max_len = 1000;  // of the positional encoding
  bool use_bias = false;  // of the attention projections (d2l: false)
  Shape norm_shape;  // of every LayerNorm; empty means {num_hiddens}
  Positions positions = Positions::sinusoidal;
  // Key and value heads of every attention (grouped-query); 0: num_heads.
  std::int64_t num_kv_heads = 0;
  Shape layer_norm_shape() const { return norm_shape.empty() ? Shape{num_hiddens} : norm_shape; }
  std::int64_t kv_heads() const { return num_kv_heads == 0 ? num_heads : num_kv_heads; }
  void validate() const;  // ValueError naming the first bad field
  // The rules of num_kv_heads and rotary positions alone (validate's last),
  // for a config whose vocabulary sizes the data has yet to set.
  void validate_heads() const;
};

// dense2(relu(dense1(X))): (B, T, in) -> (B, T, out)
class PositionWiseFFN : public Module {
 public:
  PositionWiseFFN(std::int64_t num_input, std::int64_t num_hiddens, std::int64_t num_outputs);
  Tensor forward(const Tensor& X);
  std::shared_ptr<Linear> dense1, dense2;
};

// LayerNorm(dropout(Y) + X)
class AddNorm : public Module {
 public:
  AddNorm(Shape normalized_shape, double dropout);
  Tensor forward(const Tensor& X, const Tensor& Y);
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<LayerNorm> ln;
};

class EncoderBlock : public Module {
 public:
  // d2l's signature: (key_size, query_size, value_size, num_hiddens,
  // norm_shape, ffn_num_input, ffn_num_hiddens, num_heads, dropout, use_bias)
  // Beyond it: num_kv_heads and rotary (MultiHeadAttention's).
  EncoderBlock(std::int64_t key_size, std::int64_t query_size, std::int64_t value_size,
               std::int64_t num_hiddens, Shape norm_shape, std::int64_t ffn_num_input,
               std::int64_t ffn_num_hiddens, std::int64_t num_heads, double dropout,
               bool use_bias = false, std::int64_t num_kv_heads = 0, bool rotary = false);
  Tensor forward(const Tensor& X, const Tensor& valid_lens,
                 const RelativePositions& positions = {});
  std::shared_ptr<MultiHeadAttention> attention;
  std::shared_ptr<AddNorm> addnorm1, addnorm2;
  std::shared_ptr<PositionWiseFFN> ffn;
};

// A container whose children are named "block0", "block1", ... (d2l's nn.Sequential).
template <class Block>
class Blocks : public Module {
 public:
  void append(std::shared_ptr<Block> b) {
    blocks.push_back(register_module("block" + std::to_string(blocks.size()), std::move(b)));
  }
  std::vector<std::shared_ptr<Block>> blocks;
};

// What the encoder and the decoder share: the token embedding, scaled by
// sqrt(num_hiddens), the positions and the stack of blocks, registered in
// d2l's order (embedding, pos_encoding, blks: the names of the parameters a
// checkpoint holds; learned_pos or relative_bias before blks where the
// positions have them). Block is EncoderBlock or DecoderBlock.
template <class Block>
class TransformerStack : public Module {
 public:
  std::int64_t num_hiddens, num_heads;
  Positions positions;
  std::shared_ptr<Embedding> embedding;
  // d2l's sinusoids; with other positions only its dropout is used.
  std::shared_ptr<PositionalEncoding> pos_encoding;
  std::shared_ptr<LearnedPositionalEncoding> learned_pos;  // Positions::learned only
  std::shared_ptr<RelativePositionBias> relative_bias;  // Positions::relative only
  std::shared_ptr<Blocks<Block>> blks;

 protected:
  // Validates c; the blocks are the derived class's to append. `causal`: a
  // decoder (its relative buckets one-sided).
  TransformerStack(const TransformerConfig& c, std::int64_t vocab_size, bool causal);
  // Token ids X (B, T): embedding(X) * sqrt(num_hiddens), then the absolute
  // positions from position `start` where the scheme has them, and dropout.
  Tensor embed(const Tensor& X, std::int64_t start);
  // The scheme's relative positions for a self-attention over K keys
  // (queries at query_start, undefined: the last of the keys), biases in `dtype`.
  RelativePositions self_positions(std::int64_t K, DType dtype,
                                   const Tensor& query_start = Tensor());
  bool rotary() const { return positions == Positions::rotary; }
};

class TransformerEncoder : public TransformerStack<EncoderBlock> {
 public:
  explicit TransformerEncoder(const TransformerConfig& c);
  // X (B, T) ids, valid_lens (B) -> (B, T, num_hiddens)
  Tensor forward(const Tensor& X, const Tensor& valid_lens);
  // Self-attention weights of each layer from the last forward: (B * heads, T, T).
  std::vector<Tensor> attention_weights() const;
};

// ---- Rows at different positions (continuous batching) ----
//
// A decoding batch whose sentences join and leave at any step
// (seq2seq::DecodingBatch) feeds each row one token at the row's own
// position, and keeps its caches in slots that it hands out itself:
//   source slot e: per decoder layer, the cross-attention keys and values of
//     one encoded source, its first `length` positions valid;
//   cache row w: per decoder layer, self-attention keys and values by
//     position (key p of a hypothesis at column p of some row).
// A row reads its earlier keys through a table (key p in cache row
// key_rows[r, p]), so the beams of a sentence share the cache of their common
// prefix, as DecoderState::self_rows does for a batch that steps together.
// Every row is computed as it would be alone, on the same kernels as step():
// the decode attention kernel reads only a row's own keys, and the products
// (batch-invariant inside an ops BatchInvariant scope: attn/ops/precision.h)
// treat every row by itself. Shapes are in the heads layout of
// ops/attention.h: (slots, positions, heads, d).
struct SlotCache {
  std::vector<Tensor> cross_k, cross_v;  // per layer (source slots, capacity, heads, d)
  std::vector<Tensor> self_k, self_v;  // per layer (cache rows, capacity, heads, d)
  // Memory held, in bytes (every buffer's capacity).
  std::int64_t bytes() const;
};

// One step of R rows (TransformerDecoder::step_rows). All integer tensors
// are i64 and contiguous.
struct RowStep {
  Tensor tokens;  // (R, 1): each row's input token
  Tensor positions;  // (R): its position (0 for <bos>), below max_len
  Tensor source_slots;  // (R): the source slot it attends to
  Tensor source_lens;  // (R): that source's valid length, >= 1
  // (R, P), P = max(positions) + 1: the cache row of the row's key at each
  // position up to its own; entry (r, positions[r]) is write_rows[r], the
  // rest of the row past it is ignored (any valid cache row).
  Tensor key_rows;
  Tensor write_rows;  // (R): the cache row that takes this step's key and value
};

class DecoderBlock : public Module {
 public:
  DecoderBlock(std::int64_t key_size, std::int64_t query_size, std::int64_t value_size,
               std::int64_t num_hiddens, Shape norm_shape, std::int64_t ffn_num_input,
               std::int64_t ffn_num_hiddens, std::int64_t num_heads, double dropout, std::int64_t i,
               std::int64_t num_kv_heads = 0, bool rotary = false);
  // Full sequence, causal (d2l's training path): X (B, T, H); `positions`
  // of the self-attention.
  Tensor forward(const Tensor& X, const Tensor& enc_outputs, const Tensor& enc_valid_lens,
                 const RelativePositions& positions = {});
  // Incremental: X holds the new tokens only; self-attention keys and values
  // of X are appended to the cache and the queries attend to the whole cache.
  // cross_lens: the source's valid length of each row of X (the state's
  // enc_valid_lens read through its encoder_index); `positions` of the
  // self-attention over the whole cache.
  Tensor forward_cached(const Tensor& X, DecoderState& state, const Tensor& cross_lens,
                        const RelativePositions& positions = {});
  // One token per row at the rows' own positions (TransformerDecoder::step_rows).
  Tensor forward_rows(const Tensor& X, const RowStep& step, SlotCache& cache,
                      const RelativePositions& positions = {});

  std::int64_t i;
  std::shared_ptr<MultiHeadAttention> attention1, attention2;
  std::shared_ptr<AddNorm> addnorm1, addnorm2, addnorm3;
  std::shared_ptr<PositionWiseFFN> ffn;
};

class TransformerDecoder : public TransformerStack<DecoderBlock> {
 public:
  explicit TransformerDecoder(const TransformerConfig& c);
  DecoderState init_state(const Tensor& enc_outputs, const Tensor& enc_valid_lens) const;
  // Teacher forcing over a whole target sequence X (B, T), causal mask
  // dec_valid_lens = 1..T: logits (B, T, vocab).
  Tensor forward(const Tensor& X, const DecoderState& state);
  // One or more new tokens X (B, t) at positions state.steps..: logits (B, t, vocab),
  // with the KV cache updated. Only the new tokens' keys and values are computed.
  Tensor step(const Tensor& X, DecoderState& state);
  // step()'s most likely tokens, i64 (B, t): the output layer through
  // linear_argmax (attn/ops/matmul.h), the same tokens as step()'s argmax.
  Tensor step_argmax(const Tensor& X, DecoderState& state);
  // Rows at their own positions (SlotCache above): logits (R, 1, vocab), or
  // with `argmax` each row's most likely token, i64 (R, 1). Writes each row's
  // key and value at (write_rows[r], positions[r]) of every layer's cache,
  // growing the cache rows and positions as needed; the source slots must
  // hold the sources (encode_sources). For a row at position p whose earlier
  // keys are those step() cached for the same tokens, the same numbers as
  // step() (inference only, eval mode).
  Tensor step_rows(const RowStep& step, SlotCache& cache, bool argmax = false);
  // [0][layer]: self-attention, [1][layer]: cross-attention weights of the
  // last call, each (B * heads, T_query, T_key).
  std::array<std::vector<Tensor>, 2> attention_weights() const;

  std::int64_t num_layers;
  std::shared_ptr<Linear> dense;

 private:
  // step() up to the output layer: the last block's output (B, t, hiddens).
  Tensor step_hidden(const Tensor& X, DecoderState& state);
};

// The name and shape of every parameter of EncoderDecoder(c), in the order
// of its named_parameters(), computed without building the model: a loader
// checks a weights file against a config with it before allocating a model
// of the config's sizes.
std::vector<std::pair<std::string, Shape>> transformer_parameter_shapes(const TransformerConfig& c);

// d2l's Transformer (the seq2seq interface of nn/seq2seq_model.h).
class EncoderDecoder : public Seq2SeqModel {
 public:
  explicit EncoderDecoder(const TransformerConfig& c);
  // enc_X (B, Ts), dec_X (B, Tt), enc_valid_lens (B) -> logits (B, Tt, tgt_vocab)
  Tensor forward(const Tensor& enc_X, const Tensor& dec_X, const Tensor& enc_valid_lens) override;
  DecoderState begin(const Tensor& enc_X, const Tensor& enc_valid_lens) override;
  Tensor decode(const Tensor& dec_X, const DecoderState& state) override;
  Tensor step(const Tensor& X, DecoderState& state) override;
  Tensor step_argmax(const Tensor& X, DecoderState& state) override;
  AttentionWeights attention_weights() const override;
  // Encodes n sources of one length (src (n, Ts), no padding) and stores each
  // decoder layer's cross-attention keys and values of source b in source
  // slot slots[b] of `cache` (growing it), for step_rows. Each source is
  // encoded as it would be alone: its rows never meet another's padding.
  // (Virtual for tests that watch a model's work.)
  virtual void encode_sources(const Tensor& src, const std::vector<std::int64_t>& slots,
                              SlotCache& cache);
  Tensor step_rows(const RowStep& step, SlotCache& cache, bool argmax = false) {
    return decoder->step_rows(step, cache, argmax);
  }
  std::string architecture() const override { return "transformer"; }
  std::int64_t tgt_vocab_size() const override { return config.tgt_vocab_size; }
  std::int64_t max_len() const override { return config.max_len; }
  std::int64_t num_heads() const override { return config.num_heads; }
  bool concurrent_decoding() const override { return true; }

  TransformerConfig config;
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;
};

}  // namespace attn::nn

namespace attn {
template <>
struct EnumNames<nn::Positions> {
  static constexpr const char* what = "positions";
  static constexpr std::array<const char*, 5> names{"sinusoidal", "learned", "rotary", "alibi",
                                                    "relative"};
};
}  // namespace attn
