// attn/nn/positional.h — positional encodings added to (B, T, num_hiddens) inputs.
#pragma once

#include "attn/nn/layers.h"

namespace attn::nn {

// d2l's sinusoidal encoding: P[i, 2j] = sin(i / 10000^(2j/d)),
// P[i, 2j+1] = cos(i / 10000^(2j/d)), computed in f32 as d2l does.
// forward(X) = dropout(X + P[:T]). With an odd num_hiddens the last column is
// a sine (d2l itself fails there). P is a constant, not a parameter.
class PositionalEncoding : public Module {
 public:
  PositionalEncoding(std::int64_t num_hiddens, double dropout, std::int64_t max_len = 1000);
  // X (B, T, num_hiddens); positions start at `start` (used by incremental
  // decoding, where step t must get position t, not 0).
  Tensor forward(const Tensor& X, std::int64_t start = 0);

  std::int64_t num_hiddens, max_len;
  Tensor P;  // (1, max_len, num_hiddens), f32
  std::shared_ptr<Dropout> dropout;
};

// A learned positional embedding (the chapter's exercise): parameter "P" of
// shape (1, max_len, num_hiddens), initialized N(0, 0.02).
class LearnedPositionalEncoding : public Module {
 public:
  LearnedPositionalEncoding(std::int64_t num_hiddens, double dropout, std::int64_t max_len = 1000);
  Tensor forward(const Tensor& X, std::int64_t start = 0);

  std::int64_t num_hiddens, max_len;
  Tensor P;
  std::shared_ptr<Dropout> dropout;
};

// T5's learned relative-position bias (Raffel et al.), one table per stack
// shared by its layers: parameter "weight" (heads, buckets), zeros at first;
// forward(K) reads it at t5_bucket of every query minus key distance
// (ops/positions.h): (heads, 2K - 1), AttentionOptions::position_bias's form.
// `bidirectional` (an encoder): keys after the query have buckets of their
// own; else (a causal decoder) they share bucket 0, never seen.
class RelativePositionBias : public Module {
 public:
  RelativePositionBias(std::int64_t heads, bool bidirectional, std::int64_t buckets = 32,
                       std::int64_t max_distance = 128);
  Tensor forward(std::int64_t K);

  bool bidirectional;
  std::int64_t max_distance;
  Tensor weight;
};

}  // namespace attn::nn
