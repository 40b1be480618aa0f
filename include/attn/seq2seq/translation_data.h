// attn/seq2seq/translation_data.h — a translator's data, from a RunSpec.
//
// The pipeline of `attn train` when it trains a translator (a SentencePiece
// tokenizer, or --batch-tokens): the corpus read as written, the held-out
// split grouped by source sentence (data/corpus.h), the tokenizer trained on
// the training pairs only, every pair encoded, the training pairs too long
// to train on dropped (and counted), and the token batches' input. d2l's
// pipeline (data/nmt.h) stays as it is for the d2l preset.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
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

// The data of a run, whichever pipeline it takes (d2l's, `nmt`, or a
// translator's, `tr`), and the batches it trains on: what `attn train` and
// attn.train() both read. The batches refer to the data beside them, so a
// RunData stays where it was made (load_run_data hands it out on the heap).
struct RunData {
  RunData() = default;
  RunData(const RunData&) = delete;
  RunData& operator=(const RunData&) = delete;

  data::NmtData nmt;
  std::optional<TranslationData> tr;
  std::unique_ptr<BatchSource> batches;
  std::uint64_t fingerprint = 0;  // data_fingerprint or translation_fingerprint

  const data::Vocab& vocab(data::Side side) const;
  // What save_model keeps beside the weights: the SentencePiece model, the
  // run's hyperparameters (training.json) and its id.
  ModelExtras extras(const RunSpec& run) const;
};

// Reads and prepares the data of `run`. A fresh run trains its tokenizer
// (unless `spm_model` hands it one another process trained) and sets the rows
// the data decides: vocabulary sizes, training pairs, the fingerprint, the
// corpus's absolute path. A resumed one (fresh false) passes the SentencePiece
// model its directory holds and changes nothing in `run`; the caller compares
// the fingerprint with the checkpoint's.
std::unique_ptr<RunData> load_run_data(RunSpec& run, bool fresh,
                                       const std::string* spm_model = nullptr);

// DIR/data/{train,valid,test}.tsv: a translator's split as read, so that
// anyone can re-score the model.
void write_split(const std::string& dir, const TranslationData& data);

}  // namespace attn::seq2seq
