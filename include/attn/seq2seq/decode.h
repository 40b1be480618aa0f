// attn/seq2seq/decode.h — greedy and beam-search decoding on token ids, with
// the KV cache.
//
// Decoding works on ids: turning text into source ids and target ids back
// into text is the caller's business (seq2seq/translate.h does it for d2l's
// word-level pipeline).
//
// One batched loop serves greedy decoding (beam_size 1) and beam search. Every
// live hypothesis ("beam") is one batch row of the decoder: a step feeds each
// row its last token and computes only that token's keys and values (the KV
// cache of nn::DecoderState). After each step the rows are rebuilt from the
// survivors: a beam that continues the prefix of another row takes over that
// row's cache (DecoderState::select_rows, which copies the cached steps), and
// sentences that are done leave the batch, so every step's work is sized to
// the live hypotheses only — none for finished sentences or padding beams.
//
// Scores. A hypothesis y_1..y_n has log_prob = sum_t log p(y_t | y_<t, x),
// <eos> included when it ended with <eos>. Its score is GNMT's length
// normalization (Wu et al. 2016, eq. 14, without the coverage term):
//   score = log_prob / lp(|Y|),   lp(|Y|) = ((5 + |Y|) / 6)^alpha
// where |Y| counts the tokens it generated, <eos> included, and alpha is
// `length_penalty` (0: score = log_prob; larger alpha favours longer output).
//
// The search at each step, per sentence (K = beam_size): every live beam b
// and token v make the candidate (b, v) of log_prob lp(b) + log p(v | b); the
// candidates are ranked by that sum, best first (ties: lower beam row, then
// lower token id, so beam size 1 takes the first maximal logit exactly as
// greedy argmax does). Walking down the ranking, a candidate ending in <eos>
// among the first K becomes a finished hypothesis (without the <eos> in its
// ids); an <eos> ranked below K is dropped; every other candidate becomes a
// live beam until K beams are live. At the sentence's length limit (below),
// the first K candidates all become finished hypotheses, those without <eos>
// as they are (Hypothesis::eos false).
//
// Stopping rule: a sentence is done when it has K finished hypotheses, when
// no beam is live, or when it has n_best finished hypotheses and no live beam
// can still beat the n_best-th of them: for alpha >= 0 a live beam of
// log_prob p can at best end with score p / lp(L) (its log_prob only falls,
// and the penalty is largest at the limit L), so the search stops once
// p / lp(L) < that score for every live beam — which changes no result of
// the K-finished rule, it only skips steps that cannot change the n-best.
//
// Length limit of sentence b, in generated tokens with <eos>:
//   L_b = min(net.config.max_len,                   (the model's positions)
//             max_length            if max_length > 0,
//             ceil(max_length_factor * S_b)  if max_length_factor > 0)
// and at least 1, where S_b = src_valid_lens[b], the source's ids as the
// encoder sees them (d2l's sources count their <eos>). The decoder's inputs
// sit at positions 0..L_b - 1 (<bos> at 0), so L_b <= max_len always fits.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "attn/nn/transformer.h"

namespace attn::seq2seq {

struct DecodeOptions {
  std::int64_t beam_size = 1;  // K >= 1; 1 is greedy decoding
  double length_penalty = 0;  // alpha of GNMT's lp(|Y|), >= 0
  std::int64_t n_best = 1;  // hypotheses returned per sentence, 1..beam_size
  std::int64_t max_length = 0;  // most generated tokens (with <eos>); 0: the model's max_len
  double max_length_factor = 0;  // limit ceil(factor * source length); 0: off
  // Record each hypothesis's attention weights while decoding (for pictures
  // and tests; runs the materialized attention path, which records them).
  bool keep_attention = false;
  // Greedy decoding (beam_size 1) only: false takes each step's argmax alone,
  // without the log-softmax over the vocabulary that a log-probability needs
  // (PyTorch's argmax loop; CTranslate2's return_scores = false); the same
  // tokens, and the hypotheses' log_prob and score are NaN (not computed).
  // Beam search ranks by them and computes them regardless.
  bool scores = true;

  void validate() const;  // ValueError naming the first bad field
};

// The attention weights of one hypothesis, recorded step by step while it
// was decoded, per layer: decoder self-attention (heads, T, T) and
// cross-attention (heads, T, Ts), where T counts its decoder inputs (<bos>
// and every generated token but the last) and Ts the source row's width.
// Row t is the step that fed input t; self-attention entries above the
// diagonal are 0 (the keys it could not see).
struct HypothesisAttention {
  std::vector<Tensor> self, cross;
};

struct Hypothesis {
  std::vector<std::int64_t> ids;  // the generated tokens, without <bos> and <eos>
  double log_prob = 0;  // sum of the log-probabilities of its tokens (and <eos>)
  double score = 0;  // log_prob / lp(|Y|)
  bool eos = true;  // false: stopped at the length limit without <eos>
  HypothesisAttention attention;  // only with DecodeOptions::keep_attention
};

// GNMT's length penalty ((5 + length) / 6)^alpha.
double length_penalty(std::int64_t length, double alpha);

// L_b of the rule above for a source of `source_length` ids and a model of
// `max_len` positions.
std::int64_t max_decode_length(std::int64_t source_length, std::int64_t max_len,
                               const DecodeOptions& options);

// Decodes every source row. src (B, Ts) integer ids, padded; src_valid_lens
// (B) integer, each in [0, Ts] and at most the model's max_len (else a
// ValueError naming the row and both lengths: nothing is cut here); bos and
// eos are target ids. Returns per row at most n_best hypotheses, best score
// first (ties: higher log_prob, then found earlier), distinct. Runs in eval
// mode without autograd. B = 0 gives an empty result.
std::vector<std::vector<Hypothesis>> decode(nn::Seq2SeqModel& net, const Tensor& src,
                                            const Tensor& src_valid_lens, std::int64_t bos,
                                            std::int64_t eos, const DecodeOptions& options = {});

// ---- Continuous batching ----
//
// DecodingBatch decodes sentences that join and leave at any step
// (iteration-level scheduling, as LLM servers do): add() queues a source,
// which is encoded and joins the batch at the next step(); a sentence leaves
// when its search is done (that step returns its n-best list) or when
// remove() drops it. Greedy and beam sentences mix, each with its own
// DecodeOptions, under the rules above (t counts the sentence's own steps).
//
// A sentence's hypotheses do not depend on what else is in the batch, nor on
// when it joined: its source is encoded without padding (together only with
// sources of its length that join at the same step), its rows read only its
// own keys (nn::TransformerDecoder::step_rows), and step() runs inside an
// ops BatchInvariant scope (attn/ops/precision.h), where the products take
// every row alone. That holds for a model whose weights are frozen (a
// PrecisionScope given its parameters, as every decoding command opens);
// then a sentence gets the same bits in any batch, and translate_texts,
// which decodes through a DecodingBatch, gives what a server gets.
//
// Only the Transformer (nn::EncoderDecoder, else a ValueError); no
// keep_attention. One owner: not for concurrent calls.
class DecodingBatch {
 public:
  using Handle = std::uint64_t;
  struct Done {
    Handle handle;
    std::vector<Hypothesis> hypotheses;  // at most n_best, best first (as decode())
  };

  // bos and eos are target ids. Puts the model in eval mode.
  DecodingBatch(nn::Seq2SeqModel& net, std::int64_t bos, std::int64_t eos);
  ~DecodingBatch();
  DecodingBatch(const DecodingBatch&) = delete;
  DecodingBatch& operator=(const DecodingBatch&) = delete;

  // Queues one source: its ids as the encoder reads them (d2l's sources and
  // the translator's count their <eos>), 1 to the model's max_len of them
  // (else a ValueError). It joins at the next step().
  Handle add(std::vector<std::int64_t> source, const DecodeOptions& options);
  // Drops a sentence that has not finished, queued or decoding, and frees
  // its rows; false when there is none with that handle.
  bool remove(Handle handle);
  // One decoding step: the queued sources are encoded and join, then every
  // live row is fed its next token. Returns the sentences that finished.
  std::vector<Done> step();

  // Sentences added and neither finished nor removed (queued included).
  std::int64_t sentences() const;
  // Rows (live hypotheses) that the next step() feeds, the queued sources'
  // first rows included.
  std::int64_t rows() const;
  // Bytes the caches hold now (released whenever the batch runs empty,
  // unless keep_caches).
  std::int64_t cache_bytes() const;
  // Whether the caches keep their memory when the batch runs empty (default
  // false: released). A server's loop keeps them, and so does each thread of
  // translate_texts from batch to batch: its caches then grow to its busiest
  // batch and stay, instead of being rebuilt after every pause or batch, each
  // rebuild a new round of geometric growth in the heap. What a kept
  // cache holds is never read by a sentence that did not write it.
  void keep_caches(bool keep);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attn::seq2seq
