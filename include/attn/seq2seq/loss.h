// attn/seq2seq/loss.h — d2l's MaskedSoftmaxCELoss.
#pragma once

#include "attn/core/tensor.h"

namespace attn::seq2seq {

// pred (B, T, V) logits, label (B, T) ids, valid_len (B): the cross-entropy of
// each position, zeroed at t >= valid_len[b], averaged over T (not over the
// valid positions, as d2l). Returns (B).
Tensor masked_ce_loss(const Tensor& pred, const Tensor& label, const Tensor& valid_len);

// The (B, T) 0/1 mask t < valid_len[b], in `dtype` (d2l's sequence_mask on ones).
Tensor sequence_mask(const Tensor& valid_len, std::int64_t T, DType dtype);

}  // namespace attn::seq2seq
