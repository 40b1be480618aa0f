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

// The same for attention heads x (B, T, H, D), D even: step t of batch row b
// at position start[b] + t (start: (B) integers >= 0, or undefined: 0), every
// head rotated alike. Differentiable in x.
Tensor rotary_heads(const Tensor& x, const Tensor& start, double base = 10000.0);

// A relative-position bias in the form AttentionOptions::position_bias takes
// (attn/ops/attention.h): (heads, 2K - 1), entry i for the query minus key
// distance i - (K - 1).
// ALiBi: -slope[h] |distance| (constants: nothing to learn).
Tensor alibi_bias(std::int64_t heads, std::int64_t K, DType dtype = DType::f32);
// The same values as a view of a table kept per (heads, dtype) for the
// process and shared by every caller (rows 2K' - 1 apart, K' >= K): read
// it, never write it. What the Transformer passes the attention kernels: a
// decoder asks for one more key each step, and a table that every thread
// has read before costs a step nothing, where a fresh one written by one
// thread and read by the others cost a decode step over 256 keys on 2
// threads 2.7 us (30%).
Tensor alibi_bias_kept(std::int64_t heads, std::int64_t K, DType dtype = DType::f32);
// T5: table (heads, num_buckets), learned, read at t5_bucket(-distance,
// bidirectional) for every distance; differentiable in table.
Tensor t5_bias(const Tensor& table, std::int64_t K, bool bidirectional,
               std::int64_t max_distance = 128);

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
