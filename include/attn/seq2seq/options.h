// attn/seq2seq/options.h — the options of a model and of its training that
// take one of a few names. Flags, config.json and the checkpoint hold the
// names (core/enum_names.h); the hyperparameter table parses them into these
// enums, and nothing inside compares the text again.
#pragma once

#include <array>

#include "attn/core/enum_names.h"

namespace attn::seq2seq {

// transformer: d2l 10.7; bahdanau: d2l 10.4, the GRU encoder-decoder with
// additive attention.
enum class Architecture { transformer, bahdanau };
// word: d2l's word vocabularies (src_vocab.txt, tgt_vocab.txt); spm: a
// SentencePiece model (spm.model) shared by both sides (data/tokenizer.h).
enum class TokenizerKind { word, spm };
// The SentencePiece model's algorithm.
enum class SpmType { unigram, bpe };
// How the embeddings start (nn::init_embeddings): normal, N(0, 1) (d2l's,
// PyTorch's default); scaled, N(0, 1 / num_hiddens).
enum class EmbeddingInit { normal, scaled };
// d2l: d2l's MaskedSoftmaxCELoss (each sentence's cross-entropy summed over
// its valid positions and divided by num_steps) summed over the batch; token:
// the mean cross-entropy per target token.
enum class Loss { d2l, token };
// What the best model is chosen by: bleu (higher is better), loss (lower).
enum class ValidMetric { bleu, loss };

}  // namespace attn::seq2seq

namespace attn {

template <>
struct EnumNames<seq2seq::Architecture> {
  static constexpr const char* what = "architecture";
  static constexpr std::array<const char*, 2> names{"transformer", "bahdanau"};
};
template <>
struct EnumNames<seq2seq::TokenizerKind> {
  static constexpr const char* what = "tokenizer";
  static constexpr std::array<const char*, 2> names{"word", "spm"};
};
template <>
struct EnumNames<seq2seq::SpmType> {
  static constexpr const char* what = "SentencePiece model type";
  static constexpr std::array<const char*, 2> names{"unigram", "bpe"};
};
template <>
struct EnumNames<seq2seq::EmbeddingInit> {
  static constexpr const char* what = "embedding init";
  static constexpr std::array<const char*, 2> names{"normal", "scaled"};
};
template <>
struct EnumNames<seq2seq::Loss> {
  static constexpr const char* what = "loss";
  static constexpr std::array<const char*, 2> names{"d2l", "token"};
};
template <>
struct EnumNames<seq2seq::ValidMetric> {
  static constexpr const char* what = "valid metric";
  static constexpr std::array<const char*, 2> names{"bleu", "loss"};
};

}  // namespace attn
