// attn/data/tokenizer.h — text <-> token ids for a translation model.
//
// Two kinds, chosen by a model's config.json ("tokenizer"):
//   word: d2l's pipeline (nmt.h) — lowercased, a space put before , . ! ?,
//         split on spaces, mapped through the source and target Vocab;
//         decoding joins the target tokens with spaces (d2l's output). The
//         d2l preset uses it, unchanged.
//   spm:  one SentencePiece model (Kudo & Richardson 2018, arXiv 1808.06226;
//         Debian's libsentencepiece) shared by both sides: text is kept as
//         written (cased, untokenized) and decoding gives detokenized text
//         ("Je suis chez moi."). Its ids 0-3 are <unk> <pad> <bos> <eos>,
//         as in d2l's vocabularies, and its pieces make both Vocabs.
// Encoding gives the ids of the text alone: the caller adds <eos> (and
// <bos>) where the model wants them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attn/data/vocab.h"

namespace attn::data {

enum class Side { source, target };

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // "word" or "spm".
  virtual std::string kind() const = 0;
  virtual std::vector<std::int64_t> encode(std::string_view text, Side side) const = 0;
  // Ids (no <bos>/<eos>) back to text.
  virtual std::string decode(const std::vector<std::int64_t>& ids, Side side) const = 0;
  // The tokens of `ids` as they are shown in pictures ("▁Je", "suis", ...).
  virtual std::vector<std::string> pieces(const std::vector<std::int64_t>& ids,
                                          Side side) const = 0;
  virtual const Vocab& vocab(Side side) const = 0;
};

// d2l's word pipeline with the two vocabularies.
std::unique_ptr<Tokenizer> word_tokenizer(Vocab source, Vocab target);

// A SentencePiece model from its serialized bytes (the file spm.model).
// IOError "<what>: not a SentencePiece model ..." for bytes that do not load,
// or a model whose ids 0-3 are not <unk> <pad> <bos> <eos>.
std::unique_ptr<Tokenizer> sentencepiece_tokenizer(const std::string& model_bytes,
                                                   const std::string& what);

struct SentencePieceOptions {
  std::int64_t vocab_size = 8000;
  std::string model_type = "unigram";  // or "bpe"
};

// Trains a SentencePiece model on `sentences` (deterministic for the same
// sentences, options and seed: one thread, no sampling of the input) and
// returns its serialized bytes. ValueError with SentencePiece's reason for a
// vocabulary size the sentences cannot fill ("Vocabulary size is too high
// (40000). Please set it to a value <= 11240.").
std::string train_sentencepiece(const std::vector<std::string>& sentences,
                                const SentencePieceOptions& options, std::uint64_t seed);

}  // namespace attn::data
