// attn/seq2seq/translate.h — greedy decoding with the KV cache.
#pragma once

#include <string>
#include <vector>

#include "attn/data/vocab.h"
#include "attn/nn/transformer.h"

namespace attn::seq2seq {

struct Translation {
  std::string source;  // as given
  data::Tokens source_tokens;  // after d2l's preprocessing
  data::Tokens tokens;  // predicted, without <eos>
  std::string text;  // tokens joined by ' '
};

// Translates every sentence in one batch. Each sentence is preprocessed as
// the corpus was (lowercase, spaces before punctuation), mapped to ids
// (unknown words -> <unk>), given <eos>, and cut or padded to num_steps.
// Decoding starts from <bos> and appends the argmax token step by step, each
// step computing only the new token's keys and values (the KV cache), until
// every sentence has produced <eos> or num_steps tokens.
std::vector<Translation> translate_greedy(nn::EncoderDecoder& net, const data::Vocab& src_vocab,
                                          const data::Vocab& tgt_vocab,
                                          const std::vector<std::string>& sentences,
                                          std::int64_t num_steps);

// Every attention map of one translation, for pictures: encoder
// self-attention [layer] (heads, Ts, Ts); decoder self- and cross-attention
// [layer] (heads, Tt, Tt) and (heads, Tt, Ts), where Tt counts <bos> and the
// predicted tokens. Obtained by one teacher-forced pass over the prediction,
// which gives the same numbers as the cached decoding steps.
struct AttentionMaps {
  data::Tokens source_tokens;  // with <eos>, cut to the valid length
  data::Tokens target_tokens;  // <bos> + prediction
  std::vector<Tensor> encoder, decoder_self, decoder_cross;
};
AttentionMaps attention_maps(nn::EncoderDecoder& net, const data::Vocab& src_vocab,
                             const data::Vocab& tgt_vocab, const Translation& translation,
                             std::int64_t num_steps);

// Source ids (1, num_steps) and valid length (1) of one preprocessed sentence.
std::pair<Tensor, Tensor> encode_source(const data::Vocab& src_vocab, const data::Tokens& tokens,
                                        std::int64_t num_steps);

}  // namespace attn::seq2seq
