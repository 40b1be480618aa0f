// attn/ops/positions.h — the building blocks of relative positions, beyond
// the book's absolute sinusoids (attn/nn/positional.h): rotary embeddings
// (Su et al., RoFormer), ALiBi's per-head slopes (Press, Smith and Lewis,
// ICLR 2022) and T5's relative-position buckets (Raffel et al.). Each makes
// the score of a query at i and a key at j depend on i - j only.
#pragma once

#include <cstdint>
#include <vector>

#include "attn/core/tensor.h"

namespace attn {

// Rotary embedding of x (..., T, D), D even, f32 or f64: row t (along the
// next-to-last dimension) is at position start + t, and each pair of its
// values (x[2i], x[2i + 1]) is rotated by the angle position * theta_i,
// theta_i = base^(-2i / D). Queries and keys rotated so give scores
// q_i . k_j that depend on i - j only (values are left as they are).
// Differentiable in x (the gradient is the rotation back).
Tensor rotary(const Tensor& x, std::int64_t start = 0, double base = 10000.0);

// ALiBi's slopes for `heads` heads, the paper's geometric sequence: for a
// power of two n, 2^(-8 k / n) for k = 1..n; otherwise those of the largest
// power of two below, then every other slope of twice that. Head h adds
// -slope[h] * |i - j| (or (i - j) causally) to its scores.
std::vector<double> alibi_slopes(std::int64_t heads);

// T5's bucket of a key at `offset` = key position - query position: exact
// buckets for the first half of the distances, then logarithmic ones up to
// max_distance (beyond it, the last); with `bidirectional`, keys after the
// query take the upper half of the buckets. In [0, num_buckets).
std::int64_t t5_bucket(std::int64_t offset, bool bidirectional, std::int64_t num_buckets = 32,
                       std::int64_t max_distance = 128);

}  // namespace attn
