// attn/data/corpus.h — sentence pairs as written, and held-out splits that mean
// something.
//
// d2l's pipeline (nmt.h) lowercases and tokenizes as it reads, and holds out
// the tail of the file. A translator keeps the text as written (cased,
// untokenized; the tokenizer decides) and holds out a random sample in which
// no source sentence of the held-out parts also appears in training: Tatoeba
// has many English sentences with several translations, and a test sentence
// seen in training with another translation measures memory, not translation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace attn::data {

struct SentencePair {
  std::string source, target;
};

// The pairs of a corpus ("source<TAB>target" per line, more tab-separated
// columns ignored, empty lines skipped; plain or gzip; a file or a stream),
// read through read_corpus_text's bounded line reader, checked as UTF-8.
// At most `max_pairs` (0: all). IOError naming the file and line for a line
// without a tab, a side that is empty, invalid UTF-8; "holds no sentence
// pairs" for a corpus of empty lines.
std::vector<SentencePair> read_pairs(const std::string& path, std::size_t max_pairs = 0);
// The same from text in memory (`what` names it in errors).
std::vector<SentencePair> parse_pairs(std::string_view text, std::string_view what,
                                      std::size_t max_pairs = 0);

struct Split {
  std::vector<SentencePair> train, valid, test;
};

// The key pairs are grouped by: the source with runs of white space made one
// space and trimmed (case kept).
std::string source_key(std::string_view source);

// A random split, deterministic from `seed`: the groups of pairs sharing a
// source_key are shuffled (Philox, Fisher-Yates) and dealt whole to test
// until it holds at least `test_size` pairs, then to valid until it holds at
// least `valid_size`, the rest to train; so no source sentence of valid or
// test appears in train, and each part may exceed its size by less than one
// group. Within each part the pairs keep the corpus's order. ValueError if
// nothing is left for training.
Split split_by_source(const std::vector<SentencePair>& pairs, std::size_t valid_size,
                      std::size_t test_size, std::uint64_t seed);

// "source<TAB>target\n" per pair; the inverse of parse_pairs.
std::string pairs_to_tsv(const std::vector<SentencePair>& pairs);

}  // namespace attn::data
