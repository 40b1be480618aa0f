#include "attn/nn/init.h"

#include "attn/nn/layers.h"
#include "attn/nn/rnn.h"

#include <cmath>

namespace attn::nn::init {

namespace {
thread_local bool t_skip_init = false;
}  // namespace

SkipInitGuard::SkipInitGuard() : previous_(t_skip_init) { t_skip_init = true; }
SkipInitGuard::~SkipInitGuard() { t_skip_init = previous_; }

void xavier_uniform_(const Tensor& w, double gain, Generator& gen) {
  ATTN_CHECK(w.dim() >= 2, ShapeError, "xavier_uniform_: expected a weight of >= 2 dims, got {}",
             shape_str(w.shape()));
  std::int64_t receptive = 1;
  for (std::int64_t d = 2; d < w.dim(); ++d) receptive *= w.size(d);
  double fan_in = static_cast<double>(w.size(1) * receptive);
  double fan_out = static_cast<double>(w.size(0) * receptive);
  double a = gain * std::sqrt(6.0 / (fan_in + fan_out));
  uniform_(w, -a, a, gen);
}

void uniform_(const Tensor& t, double low, double high, Generator& gen) {
  if (t_skip_init) return;
  copy_(t, uniform(low, high, t.shape(), gen, t.dtype()));
}

void normal_(const Tensor& t, double mean, double stddev, Generator& gen) {
  if (t_skip_init) return;
  copy_(t, normal(mean, stddev, t.shape(), gen, t.dtype()));
}

void zeros_(const Tensor& t) { fill_(t, 0.0); }
void ones_(const Tensor& t) { fill_(t, 1.0); }

}  // namespace attn::nn::init

namespace attn::nn {

void xavier_init(Module& net, Generator& gen) {
  net.apply([&](Module& m) {
    if (auto* linear = dynamic_cast<Linear*>(&m)) init::xavier_uniform_(linear->weight, 1.0, gen);
    if (auto* gru = dynamic_cast<GRU*>(&m))
      for (const auto& layer : gru->layers)
        for (int i : {0, 1}) init::xavier_uniform_(layer[static_cast<std::size_t>(i)], 1.0, gen);
  });
}

void init_embeddings(Module& net, double stddev, Generator& gen) {
  ATTN_CHECK(stddev > 0 && std::isfinite(stddev), ValueError,
             "init_embeddings: stddev must be positive and finite, got {}", stddev);
  net.apply([&](Module& m) {
    if (auto* e = dynamic_cast<Embedding*>(&m)) init::normal_(e->weight, 0.0, stddev, gen);
  });
}

}  // namespace attn::nn
