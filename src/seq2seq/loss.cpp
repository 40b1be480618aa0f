#include "attn/seq2seq/loss.h"

#include "attn/ops/loss.h"
#include "attn/ops/reduce.h"

namespace attn::seq2seq {

Tensor sequence_mask(const Tensor& valid_len, std::int64_t T, DType dtype) {
  ATTN_CHECK(valid_len.dim() == 1, ShapeError, "sequence_mask: expected valid_len (B), got {}",
             shape_str(valid_len.shape()));
  std::vector<double> lens = to_vector<double>(valid_len);
  const std::int64_t B = valid_len.size(0);
  Tensor mask = Tensor::empty({B, T}, dtype);
  dispatch_float(dtype, "sequence_mask", [&]<class F>() {
    F* m = mask.data<F>();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < T; ++t)
        m[b * T + t] = static_cast<double>(t) < lens[b] ? F(1) : F(0);
  });
  return mask;
}

Tensor masked_ce_loss(const Tensor& pred, const Tensor& label, const Tensor& valid_len) {
  ATTN_CHECK(pred.dim() == 3 && label.dim() == 2 && label.size(0) == pred.size(0) &&
                 label.size(1) == pred.size(1) && valid_len.dim() == 1 &&
                 valid_len.size(0) == pred.size(0),
             ShapeError,
             "masked_ce_loss: expected pred (B, T, V), label (B, T), valid_len (B); got {}, {}, {}",
             shape_str(pred.shape()), shape_str(label.shape()), shape_str(valid_len.shape()));
  Tensor weights = sequence_mask(valid_len, label.size(1), pred.dtype());
  return mean(cross_entropy(pred, label, weights), {1});
}

}  // namespace attn::seq2seq
