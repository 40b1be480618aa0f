// src/serve/languages.h — internal: the languages the served models speak,
// and a detector of them made from the models' own subword vocabularies.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attn/data/tokenizer.h"

namespace attn::serve {

// English names of ISO 639-1 codes ("en" -> "English"); the code itself for
// one not in the table.
std::string language_name(const std::string& code);

// Whether `code` looks like an ISO 639-1 code (two lowercase letters).
bool is_language_code(const std::string& code);

// Language identification with an honest confidence, from what the served
// models were trained on: per language, the unigram distribution of the
// model's SentencePiece pieces over sentences of that language (the model
// directory's data/*.tsv: sources for its source language, targets for its
// target), add-one smoothed over the vocabulary. A text's pieces give each
// language a log-likelihood; the confidence of language L is
//   100 x P(L | text) x fit(L, text)
// where P(L | text) is the posterior with equal priors over the known
// languages (a text made of pieces common to all of them, "Taxi", gets
// about 1/n), and fit = min(1, exp(a - a10)) compares the text's mean
// log-likelihood per piece, a, with the 10th percentile a10 of the same
// mean over the language's own sentences: a text less typical than 90% of
// them (another language, noise) loses confidence by a factor e per nat.
// A language without sentences (a model directory without data/) has the
// uniform distribution over its vocabulary and fit 1/2: it is never
// confidently detected.
class LanguageDetector {
 public:
  struct Guess {
    std::string language;
    double confidence;  // in [0, 100], one decimal
  };
  // Adds a language as seen through `tokenizer` (shared, kept): the pieces
  // of `sentences` on `side`.
  void add(const std::string& language, std::shared_ptr<const data::Tokenizer> tokenizer,
           data::Side side, const std::vector<std::string>& sentences);
  // Every known language, most confident first (ties: by code); empty when
  // none is known.
  std::vector<Guess> detect(const std::string& text) const;

 private:
  struct Model {
    std::string language;
    std::shared_ptr<const data::Tokenizer> tokenizer;
    data::Side side;
    std::vector<double> log_p;  // per piece id
    double fit_threshold = 0;  // a10
    bool has_data = false;
  };
  std::vector<Model> models_;
};

// Up to `max_lines` sentence pairs from the model directory's data/*.tsv
// (train, valid, test, in that order; files that are missing or unreadable
// are skipped: the detector then knows less).
std::vector<std::pair<std::string, std::string>> read_model_sentences(const std::string& dir,
                                                                      std::size_t max_lines);

}  // namespace attn::serve
