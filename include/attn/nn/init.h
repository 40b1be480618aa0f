// attn/nn/init.h — parameter initialization, in place, without recording gradients.
#pragma once

#include "attn/core/rng.h"
#include "attn/core/tensor.h"

namespace attn::nn::init {

// U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)); fans from a 2-D
// (out, in) weight as in PyTorch.
void xavier_uniform_(const Tensor& w, double gain = 1.0, Generator& gen = default_generator());
void uniform_(const Tensor& t, double low, double high, Generator& gen = default_generator());
void normal_(const Tensor& t, double mean = 0.0, double stddev = 1.0,
             Generator& gen = default_generator());
void zeros_(const Tensor& t);
void ones_(const Tensor& t);

// While one lives, uniform_, normal_ and xavier_uniform_ on this thread leave
// their tensor as it is and draw nothing from the generator: for building a
// model whose every parameter a strict load_state_dict overwrites next
// (loading a model directory), where the draws would be thrown away. Guards
// nest.
class SkipInitGuard {
 public:
  SkipInitGuard();
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace attn::nn::init

namespace attn::nn {

class Module;

// d2l's xavier_init_weights: Xavier-uniform on the weight of every Linear
// and on the weight_ih / weight_hh matrices of every GRU layer in `net`
// (biases and other parameters keep their initialization).
void xavier_init(Module& net, Generator& gen = default_generator());

// Draws the weight of every Embedding in `net` anew from N(0, stddev^2), in
// the order Module::apply visits them. (An Embedding starts as N(0, 1).)
void init_embeddings(Module& net, double stddev, Generator& gen = default_generator());

}  // namespace attn::nn
