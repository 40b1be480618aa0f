// attn/nn/seq2seq_model.h — what every encoder–decoder offers the seq2seq
// layer (training, decoding, attention pictures): the Transformer
// (nn/transformer.h) and the RNN encoder–decoder with Bahdanau attention
// (nn/bahdanau.h).
//
// Shapes: token ids (B, T) i64, valid lengths (B), logits (B, T, vocab).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "attn/nn/module.h"

namespace attn::nn {

// What the decoder carries between calls: the encoder's outputs and valid
// lengths, and per layer the KV cache — self-attention keys and values of
// every token decoded so far, and cross-attention keys and values of the
// encoder outputs (computed once).
// Keys and values are in the heads layout (B, steps, heads, d); self_k and
// self_v are buffers with room to grow (their first `steps` rows are valid),
// written in place, so decoding with a state runs without autograd.
struct DecoderState {
  Tensor enc_outputs, enc_valid_lens;
  std::vector<Tensor> self_k, self_v, cross_k, cross_v;
  std::int64_t steps = 0;  // tokens already decoded: the position of the next one
  // An RNN decoder's hidden state (num_layers, B, H) (undefined for the
  // Transformer); select_rows picks its rows (dim 1) with the others.
  Tensor hidden;
  // enc_outputs and enc_valid_lens are copies that select_rows made (it then
  // selects their rows in place); false while they are the caller's tensors.
  bool owns_encoder_rows = false;
  // Set by a decoder that reads the encoder side through a row index (the
  // Transformer's cross-attention, AttentionOptions::kv_rows): select_rows
  // then never moves enc_outputs, enc_valid_lens, cross_k and cross_v, and
  // keeps in encoder_index the encoder row of each row instead, so that the
  // beams of a sentence share one copy of its source's keys and values.
  bool shares_encoder_rows = false;
  Tensor encoder_index;  // (batch_size()) i64, or undefined: row i's is row i
  // Set by a decoder that reads its self-attention cache through a table
  // (the Transformer, AttentionOptions::kv_rows per key): (batch_size(),
  // steps) i64, step c of row i lying in buffer row self_rows[i, c]. Each
  // step writes the new keys and values of row i in buffer row i, so
  // select_rows only picks rows of the table and never moves self_k and
  // self_v: the beams of a sentence share the cache of their common prefix.
  // Undefined: row i of the buffers is row i.
  Tensor self_rows;

  // Batch rows of the state (of encoder_index, else of enc_valid_lens).
  std::int64_t batch_size() const {
    if (encoder_index.defined()) return encoder_index.size(0);
    return enc_valid_lens.defined() ? enc_valid_lens.size(0) : 0;
  }

  // Keeps the batch rows `rows` ((n) i32 or i64, entries in [0, batch_size()),
  // repeats allowed), in that order: afterwards row i is what row rows[i] was.
  // Beam search calls it when it prunes (a beam continues the prefix of its
  // parent row) and when sentences leave the batch. `encoder_rows` (n, or
  // undefined: `rows`) picks the rows of the encoder side (enc_outputs,
  // enc_valid_lens, cross_k, cross_v) instead: the caller promises that old
  // row encoder_rows[i] has the source of old row rows[i]. Beams of one
  // sentence share a source, so beam search passes the rows that leave that
  // side in place (the identity, when every sentence keeps its rows) or only
  // close the gaps of sentences that left.
  // With self_rows only the table's rows are picked; otherwise the rows are
  // gathered in place, in the state's own buffers, when there are no more
  // of them than before (only the `steps` valid positions of the
  // self-attention cache are moved); more rows take new buffers. With
  // shares_encoder_rows only encoder_index changes on the encoder side.
  // enc_outputs and enc_valid_lens, the caller's tensors, are copied the
  // first time they change (owns_encoder_rows) and never written. A copy of a
  // DecoderState shares its buffers, as step() writes them in place too.
  void select_rows(const Tensor& rows, const Tensor& encoder_rows = Tensor());
};

// The attention weights of a model's last call, per layer, each
// (B * heads, queries, keys) as DotProductAttention records them: encoder
// self-attention, decoder self-attention, decoder cross-attention. A kind the
// architecture does not have is empty (the Bahdanau model has only
// cross-attention, one layer of one head).
struct AttentionWeights {
  std::vector<Tensor> encoder, decoder_self, decoder_cross;
};

class Seq2SeqModel : public Module {
 public:
  // "transformer" or "bahdanau".
  virtual std::string architecture() const = 0;
  virtual std::int64_t tgt_vocab_size() const = 0;
  // The longest source or target the model takes (its positions).
  virtual std::int64_t max_len() const = 0;
  // Heads of the attention weights (1 for Bahdanau's additive attention).
  virtual std::int64_t num_heads() const = 0;

  // Teacher forcing: enc_X (B, Ts), dec_X (B, Tt), enc_valid_lens (B) ->
  // logits (B, Tt, tgt_vocab).
  virtual Tensor forward(const Tensor& enc_X, const Tensor& dec_X,
                         const Tensor& enc_valid_lens) = 0;
  // Encodes the sources: the state decoding starts from.
  virtual DecoderState begin(const Tensor& enc_X, const Tensor& enc_valid_lens) = 0;
  // Teacher forcing from a state that begin() returned: dec_X (B, Tt) ->
  // logits (B, Tt, vocab). Leaves the state as it was.
  virtual Tensor decode(const Tensor& dec_X, const DecoderState& state) = 0;
  // One or more new tokens X (B, t) after the state.steps already decoded:
  // logits (B, t, vocab); the state advances (inference only, no gradients).
  virtual Tensor step(const Tensor& X, DecoderState& state) = 0;
  // step(), but only each position's most likely token: i64 (B, t), the
  // first largest logit, as argmax takes it (greedy decoding). By default
  // the argmax of step()'s logits; a model may find it without all of them
  // (the Transformer: ops linear_argmax), with the same result.
  virtual Tensor step_argmax(const Tensor& X, DecoderState& state);
  // The weights of the last encode/decode/step call (recorded inside an
  // nn::KeepAttentionWeights scope).
  virtual AttentionWeights attention_weights() const = 0;
  // Whether threads may decode with the model side by side, each its own
  // batch and DecoderState (in eval mode, without gradients and without
  // KeepAttentionWeights): then begin() and step() only read the modules.
  // False by default; the Bahdanau model records its attention weights in
  // its modules at every step, as d2l's does.
  virtual bool concurrent_decoding() const { return false; }
};

}  // namespace attn::nn
