#include "attn/nn/conv.h"

#include <cmath>

#include "attn/nn/init.h"
#include "attn/ops/conv.h"

namespace attn::nn {

Conv1d::Conv1d(std::int64_t in, std::int64_t out, std::int64_t k, bool has_bias, DType dtype)
    : in_channels(in), out_channels(out), kernel_size(k) {
  ATTN_CHECK(in > 0 && out > 0 && k > 0, ValueError,
             "Conv1d: in_channels, out_channels and kernel_size must be positive, got {}, {} "
             "and {}",
             in, out, k);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in * k));
  weight = register_parameter("weight", Tensor::empty({out, in, k}, dtype));
  init::uniform_(weight, -bound, bound);
  if (has_bias) {
    bias = register_parameter("bias", Tensor::empty({out}, dtype));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv1d::forward(const Tensor& X) const {
  ATTN_CHECK(X.dim() == 3 && X.size(2) == in_channels, ShapeError,
             "Conv1d: expected an input (B, n, {}), got {}", in_channels, shape_str(X.shape()));
  return conv1d(X, weight, bias);
}

}  // namespace attn::nn
