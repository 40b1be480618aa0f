#include "attn/nn/positional.h"

#include <cmath>

#include "attn/nn/init.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/positions.h"

namespace attn::nn {

namespace {
void check_input(const Tensor& X, std::int64_t start, std::int64_t num_hiddens,
                 std::int64_t max_len, const char* op) {
  ATTN_CHECK(X.dim() == 3 && X.size(2) == num_hiddens, ShapeError,
             "{}: expected input (batch, steps, {}), got {}", op, num_hiddens,
             shape_str(X.shape()));
  ATTN_CHECK(start >= 0 && start + X.size(1) <= max_len, ValueError,
             "{}: positions {}..{} exceed max_len {}", op, start, start + X.size(1) - 1, max_len);
}
}  // namespace

PositionalEncoding::PositionalEncoding(std::int64_t hiddens, double p, std::int64_t len)
    : num_hiddens(hiddens), max_len(len) {
  ATTN_CHECK(hiddens > 0 && len > 0, ValueError,
             "PositionalEncoding: num_hiddens and max_len must be positive, got {} and {}", hiddens,
             len);
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  P = zeros({1, len, hiddens});
  float* pp = P.data<float>();
  for (std::int64_t i = 0; i < len; ++i) {
    for (std::int64_t j = 0; j < hiddens; j += 2) {
      // As d2l: arange(max_len) / pow(10000, arange(0, d, 2) / d), all in f32.
      float denom = std::pow(10000.0f, static_cast<float>(j) / static_cast<float>(hiddens));
      float x = static_cast<float>(i) / denom;
      pp[i * hiddens + j] = std::sin(x);
      if (j + 1 < hiddens) pp[i * hiddens + j + 1] = std::cos(x);
    }
  }
}

Tensor PositionalEncoding::forward(const Tensor& X, std::int64_t start) {
  check_input(X, start, num_hiddens, max_len, "PositionalEncoding");
  Tensor pos = P.narrow(1, start, X.size(1));
  if (pos.dtype() != X.dtype()) pos = pos.to(X.dtype());
  return dropout->forward(add(X, pos));
}

LearnedPositionalEncoding::LearnedPositionalEncoding(std::int64_t hiddens, double p,
                                                     std::int64_t len)
    : num_hiddens(hiddens), max_len(len) {
  ATTN_CHECK(hiddens > 0 && len > 0, ValueError,
             "LearnedPositionalEncoding: num_hiddens and max_len must be positive, got {} and {}",
             hiddens, len);
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  P = register_parameter("P", Tensor::empty({1, len, hiddens}));
  init::normal_(P, 0.0, 0.02);
}

Tensor LearnedPositionalEncoding::forward(const Tensor& X, std::int64_t start) {
  check_input(X, start, num_hiddens, max_len, "LearnedPositionalEncoding");
  return dropout->forward(add(X, P.narrow(1, start, X.size(1))));
}

RelativePositionBias::RelativePositionBias(std::int64_t heads, bool bidi, std::int64_t buckets,
                                           std::int64_t distance)
    : bidirectional(bidi), max_distance(distance) {
  ATTN_CHECK(heads > 0 && buckets >= 4 && distance >= 1, ValueError,
             "RelativePositionBias: {} heads, {} buckets, max distance {}", heads, buckets,
             distance);
  weight = register_parameter("weight", zeros({heads, buckets}));
}

Tensor RelativePositionBias::forward(std::int64_t K) {
  return t5_bias(weight, K, bidirectional, max_distance);
}

}  // namespace attn::nn
