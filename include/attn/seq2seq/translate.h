// attn/seq2seq/translate.h — English text in, French text out: d2l's word-level
// pipeline around decode() (greedy or beam search with the KV cache).
#pragma once

#include <string>
#include <vector>

#include "attn/data/vocab.h"
#include "attn/nn/transformer.h"
#include "attn/seq2seq/decode.h"

namespace attn::seq2seq {

struct Translation {
  std::string source;  // as given
  data::Tokens source_tokens;  // after d2l's preprocessing, all of them
  // The source had more than num_steps ids (its tokens and <eos>): only the
  // first num_steps were translated, as d2l cuts them (see translate()).
  bool source_cut = false;
  data::Tokens tokens;  // predicted, without <eos>
  std::string text;  // tokens joined by ' '
  double log_prob = 0, score = 0;  // of the hypothesis (seq2seq/decode.h); 0 for an empty source
  bool eos = true;  // false: stopped at the length limit without <eos>
};

// Translates every sentence in one batch: each is preprocessed as the corpus
// was (lowercase, spaces before punctuation), mapped to ids (unknown words ->
// <unk>), given <eos>, and cut (d2l's truncate_pad: the first num_steps ids,
// Translation::source_cut says so) or padded to num_steps; then decode()
// (seq2seq/decode.h) runs greedy decoding or beam search with the KV cache
// from <bos>. options.max_length 0 means num_steps here: at most num_steps
// generated tokens, <eos> included, the length the model was trained on
// (a larger max_length is allowed up to the model's max_len positions).
// A sentence with no token (empty, or spaces only) translates to the empty
// text without being decoded. Returns per sentence at most options.n_best
// translations, best first.
std::vector<std::vector<Translation>> translate(nn::Seq2SeqModel& net, const data::Vocab& src_vocab,
                                                const data::Vocab& tgt_vocab,
                                                const std::vector<std::string>& sentences,
                                                std::int64_t num_steps,
                                                const DecodeOptions& options = {});

// Greedy decoding (beam size 1): translate() with the default options, the
// best translation of each sentence. Decoding appends the argmax token step by
// step until a sentence has produced <eos> or num_steps tokens; sentences
// that finish leave the batch.
std::vector<Translation> translate_greedy(nn::Seq2SeqModel& net, const data::Vocab& src_vocab,
                                          const data::Vocab& tgt_vocab,
                                          const std::vector<std::string>& sentences,
                                          std::int64_t num_steps);

// Every attention map of one translation, for pictures: encoder
// self-attention [layer] (heads, Ts, Ts); decoder self- and cross-attention
// [layer] (heads, Tt, Tt) and (heads, Tt, Ts), where Tt counts the decoder's
// inputs: <bos> and the predicted tokens (but the last one when the
// translation stopped at the length limit without <eos>: it was never fed).
// Obtained by one teacher-forced pass over the prediction, which gives the
// same numbers as the cached decoding steps of that hypothesis (tested for
// beam search, whose rows are reordered as it prunes).
struct AttentionMaps {
  data::Tokens source_tokens;  // with <eos>, cut to the valid length
  data::Tokens target_tokens;  // <bos> + prediction
  std::vector<Tensor> encoder, decoder_self, decoder_cross;
};
AttentionMaps attention_maps(nn::Seq2SeqModel& net, const data::Vocab& src_vocab,
                             const data::Vocab& tgt_vocab, const Translation& translation,
                             std::int64_t num_steps);

// Source ids (1, num_steps) and valid length (1) of one preprocessed sentence.
std::pair<Tensor, Tensor> encode_source(const data::Vocab& src_vocab, const data::Tokens& tokens,
                                        std::int64_t num_steps);

}  // namespace attn::seq2seq
