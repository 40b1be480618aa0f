// attn/data/nmt.h — the English–French translation data set as d2l builds it.
//
// Source and target sentences become rows of num_steps token ids: the
// sentence's ids, then <eos>, then truncated or padded with <pad> to
// num_steps; valid_len counts the non-<pad> ids of a row.
#pragma once

#include <string>

#include "attn/core/rng.h"
#include "attn/core/tensor.h"
#include "attn/data/vocab.h"

namespace attn::data {

// The reserved tokens of a vocabulary built from a corpus (after "<unk>").
inline const std::vector<std::string> kReservedTokens = {"<pad>", "<bos>", "<eos>"};
// The tokens a model's vocabularies must hold besides "<unk>": a source
// sentence is padded and ended, a target sentence also begun (d2l 1.0 builds
// its source vocabulary without "<bos>").
inline const std::vector<std::string> kSourceTokens = {"<pad>", "<eos>"};
inline const std::vector<std::string> kTargetTokens = {"<pad>", "<bos>", "<eos>"};

// (array (N, num_steps) i64, valid_len (N) i64)
struct TokenArray {
  Tensor array;
  Tensor valid_len;
};

// d2l's truncate_pad.
std::vector<std::int64_t> truncate_pad(std::vector<std::int64_t> line, std::int64_t num_steps,
                                       std::int64_t pad);

// d2l's build_array_nmt.
TokenArray build_array_nmt(const std::vector<Tokens>& lines, const Vocab& vocab,
                           std::int64_t num_steps);

struct NmtOptions {
  std::int64_t num_steps = 10;
  long num_examples = 600;  // d2l's default; <= 0 for the whole corpus
  int min_freq = 2;
  double valid_fraction = 0.0;  // the last fraction of the pairs, kept for evaluation
  bool reverse = false;  // translate the second column into the first
};

struct NmtData {
  Vocab src_vocab, tgt_vocab;
  TokenArray src, tgt;  // training pairs
  TokenArray valid_src, valid_tgt;  // evaluation pairs (may be empty)
  ParallelCorpus valid_text;  // evaluation pairs as tokens
};

// Reads `path` (plain or gzip), checks UTF-8, preprocesses and tokenizes as
// d2l's load_data_nmt, builds both vocabularies from the training pairs.
// IOErrors name the file (and the line): missing, empty, truncated or
// corrupt gzip, invalid UTF-8, a line without a tab or longer than
// kMaxLineBytes, no sentence pairs at all.
NmtData load_data_nmt(const std::string& path, const NmtOptions& options);

// The same from text already read and decompressed (`what` names it in errors).
NmtData make_data_nmt(std::string_view text, std::string_view what, const NmtOptions& options);

// A corpus to evaluate on: read (plain or gzip), checked, preprocessed and
// tokenized as above, without vocabularies; at least one pair or an IOError.
ParallelCorpus read_parallel_corpus(const std::string& path, long num_examples);

// Shuffled mini-batches of row indices, reproducible from the generator
// (a Fisher–Yates shuffle each epoch; the last batch may be short).
std::vector<std::vector<std::int64_t>> shuffled_batches(std::int64_t n, std::int64_t batch_size,
                                                        Generator& gen);

// Rows `index` of a (N, ...) tensor, as a new contiguous tensor.
Tensor take_rows(const Tensor& t, const std::vector<std::int64_t>& index);

}  // namespace attn::data
