// attn/data/batching.h — batches by tokens, with length bucketing.
//
// d2l cuts or pads every sentence to num_steps and batches a fixed number of
// pairs; on a real corpus most positions are then padding, and long
// sentences are cut. A translator instead batches pairs of similar length,
// up to a number of tokens, and drops (and counts) the pairs too long to
// train on.
#pragma once

#include <cstdint>
#include <vector>

#include "attn/core/rng.h"
#include "attn/core/tensor.h"
#include "attn/data/corpus.h"
#include "attn/data/tokenizer.h"

namespace attn::data {

// Token ids of each side, without <eos>.
struct TokenizedPairs {
  std::vector<std::vector<std::int64_t>> src, tgt;
  std::size_t size() const { return src.size(); }
};

// Encodes every pair. A pair whose source or target, with its <eos>, has
// more than `max_length` tokens is dropped (not cut): `dropped` counts them.
TokenizedPairs tokenize_pairs(const std::vector<SentencePair>& pairs, const Tokenizer& tokenizer,
                              std::int64_t max_length, std::size_t* dropped = nullptr);

// Fixed batches for a whole run: the pairs sorted by target length, then
// source length (ties in an order drawn from `seed`), cut into runs whose
// padded size — pairs x the longest side's tokens with <eos> (and <bos> on
// the target side) — is at most `max_tokens` (a pair longer than that is a
// batch alone). Every pair is in exactly one batch. The order of the batches
// is drawn anew each epoch (epoch_order); the batches stay the same, so a run
// has the same number of steps in every epoch.
std::vector<std::vector<std::int64_t>> token_batches(const TokenizedPairs& pairs,
                                                     std::int64_t max_tokens, std::uint64_t seed);

// A random permutation of 0..n-1 drawn from `gen` (Fisher-Yates over Philox).
std::vector<std::int64_t> epoch_order(std::int64_t n, Generator& gen);

// The pairs `index` as tensors: src (B, Ts) ids + <eos>, padded with `pad`;
// src_len (B); tgt (B, Tt) and tgt_len likewise. Ts and Tt are the batch's
// longest sides (with <eos>).
struct PairBatch {
  Tensor src, src_len, tgt, tgt_len;
};
PairBatch make_batch(const TokenizedPairs& pairs, const std::vector<std::int64_t>& index,
                     std::int64_t pad, std::int64_t eos);

}  // namespace attn::data
