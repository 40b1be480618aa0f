// attn/seq2seq/translation_data.h — a translator's data, from a RunSpec.
//
// The pipeline of `attn train` when it trains a translator (a SentencePiece
// tokenizer, or --batch-tokens): the corpus read as written, the held-out
// split grouped by source sentence (data/corpus.h), the tokenizer trained on
// the training pairs only, every pair encoded, the training pairs too long
// to train on dropped (and counted), and the token batches' input. d2l's
// pipeline (data/nmt.h) stays as it is for the d2l preset.
#pragma once

#include <memory>
#include <string>

#include "attn/data/batching.h"
#include "attn/data/corpus.h"
#include "attn/data/tokenizer.h"
#include "attn/seq2seq/hparams.h"

namespace attn::seq2seq {

// Whether a run trains a translator (this pipeline) or d2l's model (nmt.h).
bool uses_translation_data(const RunSpec& run);

struct TranslationData {
  data::Split split;  // as read: the text of each part
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::string spm_model;  // the SentencePiece model's bytes (tokenizer "spm")
  data::TokenizedPairs train, valid;
  std::size_t dropped = 0;  // training pairs longer than max_length
  std::size_t valid_dropped = 0;  // validation pairs longer than the model's positions
};

// Builds everything from run.data and run.model.tokenizer: a fresh run
// trains the tokenizer (the SentencePiece model, or d2l's word vocabularies
// of the training pairs); a resumed one passes the model it trained
// (`spm_model`, nullptr for word vocabularies, which are rebuilt). The parts
// are deterministic from the corpus and run.train.seed.
TranslationData prepare_translation_data(const RunSpec& run,
                                         const std::string* spm_model = nullptr);

// Sets the RunSpec's derived rows from the data: vocabulary sizes, training
// pairs, the data fingerprint (of every training and validation id).
void describe_translation_data(const TranslationData& data, RunSpec& run);

// A 64-bit FNV-1a hash of the tokenized training and validation pairs.
std::uint64_t translation_fingerprint(const TranslationData& data);

// The batches a translator run trains on: its training pairs in batches of
// run.data.batch_tokens tokens (4,096 when 0), shuffled by run.train.seed.
std::unique_ptr<TokenBatches> translation_batches(const TranslationData& data, const RunSpec& run);

// d2l's pipeline's options for a run of word vocabularies (data/nmt.h): the
// one place where a run's data rows become load_data_nmt's options.
data::NmtOptions nmt_options(const RunSpec& run);

}  // namespace attn::seq2seq
