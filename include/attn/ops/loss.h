// attn/ops/loss.h — losses.
#pragma once

#include "attn/core/tensor.h"

namespace attn {

enum class Reduction { none, mean, sum };

// Softmax cross-entropy with integer class labels.
//   logits:  (..., C) f32 or f64
//   labels:  (...)    i32 or i64, each in [0, C)
//   weights: (...)    logits' dtype, optional; any shape that broadcasts to
//            labels' shape. Multiplies each position's loss (d2l's mask of
//            valid positions).
//   loss[...] = weights[...] * (logsumexp_c logits[..., c] - logits[..., label])
// Returns loss (...) for Reduction::none, else the 0-dim sum or mean of it
// (the mean divides by the number of positions, not by the sum of weights).
// d2l's MaskedSoftmaxCELoss is mean(cross_entropy(pred, label, mask), {1}).
//
// Backward wrt logits: (softmax(logits) - onehot(label)) * g * weight,
// with the softmax recomputed from the saved per-position max and log-sum-exp.
// Differentiable in logits and in weights; not in labels.
//
// label_smoothing eps in [0, 1): the target distribution is
// (1 - eps) onehot(label) + eps / C (Szegedy et al. 2016), so
//   loss = (1 - eps) * nll + eps * (logsumexp_c logits - mean_c logits)
// and the gradient is softmax(logits) - target. eps = 0 is the plain loss,
// computed exactly as without the argument. `nll`, when given, receives the
// per-position -log_softmax(logits)[label] (not smoothed, not weighted, no
// gradient): the quantity to report as the per-token cross-entropy.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor& weights = Tensor(),
                     Reduction reduction = Reduction::none, double label_smoothing = 0.0,
                     Tensor* nll = nullptr);

}  // namespace attn
