// examples/complexity.h — the measurements behind `attn demo complexity`
// (d2l 10.6.2, "Comparing CNNs, RNNs, and Self-Attention").
//
// Three layers that map n tokens of d dimensions to n tokens of d dimensions:
//   cnn          nn::Conv1d(d, d, k), padding that keeps n      book: O(k n d^2)
//   rnn          nn::GRU(d, d), one layer                        book: O(n d^2)
//   attention    softmax(X X^T / sqrt(d)) X, queries = keys =    book: O(n^2 d)
//                values = X, as the book's analysis (no projections), on
//                the fused kernel (attention_fused) or the materialized
//                d2l path (attention_materialized)
// and what the book's table says of them: computational cost (measured as
// time and fitted as a power of n and of d), sequential operations and
// maximum path length (counted below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::examples::cnn_rnn_attention {

enum class Layer { cnn, rnn, attention_fused, attention_materialized };
const char* layer_name(Layer layer);

// log y = log_coeff + exponent log x, least squares over the points (at
// least two, x and y positive); r2 is the coefficient of determination of
// the log-log fit. ValueError otherwise.
struct PowerFit {
  double exponent = 0, log_coeff = 0, r2 = 0;
  double operator()(double x) const;  // the fitted y at x
};
PowerFit fit_power_law(const std::vector<double>& x, const std::vector<double>& y);

// ---- maximum path length ----
//
// The dependency graph of an unbounded stack of layers of one kind: node
// (l, t) is position t of layer l's output (l = 0: the input tokens). Node
// (l, t), l >= 1, reads directly
//   from the layer below:  cnn: (l-1, t + j - p) for j < k, p = (k-1)/2, inside [0, n)
//                          rnn: (l-1, t)            attention: (l-1, s) for every s
//   from its own layer:    rnn: (l, t - 1) for t > 0 (the hidden state); none else
// The path length from input position j to position i is the fewest edges
// on a directed path from (0, j) to any (l, i), l >= 1 (breadth-first
// search); the maximum path length is the largest over the pairs (j, i) so
// connected. A (unidirectional) RNN connects only j <= i.
struct Dependencies {
  std::vector<std::int64_t> below, same_layer;
};
Dependencies dependencies(Layer layer, std::int64_t t, std::int64_t n, std::int64_t k);
std::int64_t max_path_length(Layer layer, std::int64_t n, std::int64_t k);
// What the breadth-first search gives, in closed form: cnn (odd k >= 3)
// max(1, ceil((n-1) / ((k-1)/2))), rnn n, attention 1; the book writes
// O(n/k), O(n), O(1).
std::int64_t max_path_length_formula(Layer layer, std::int64_t n, std::int64_t k);

// ---- sequential operations ----
//
// The longest chain of dependent ops in the autograd graph that produced
// `out` (views — reshape, permute, slice, ... — cost nothing; leaves are 0).
std::int64_t graph_depth(const Tensor& out);
// The layer as attn runs it, on a random (B, n, d) input, its graph depth.
// The fused GRU is one op that runs its n steps inside; for the rnn this
// counts its reference, the same layer step by step with attn's ops
// (gru_reference), whose chain is 8 ops a step.
std::int64_t sequential_ops(Layer layer, std::int64_t n, std::int64_t d, std::int64_t k);

// ---- time and memory ----
//
// One layer on (B, n, d) f32 inputs (time-major (n, B, d) for the GRU),
// built once and run as often as wanted: forward under a no-grad guard, or
// forward + backward (input and parameters requiring gradients, the
// output's gradient random), each returning its wall time. A training run
// also reports its memory: the most bytes of tensor storage live at once
// during the run (core/storage.h) above what was live before it (inputs,
// parameters, output gradient).
class LayerRun {
 public:
  LayerRun(Layer layer, std::int64_t B, std::int64_t n, std::int64_t d, std::int64_t k);
  ~LayerRun();
  LayerRun(const LayerRun&) = delete;
  LayerRun& operator=(const LayerRun&) = delete;
  double forward_seconds();
  double train_seconds(std::size_t* peak_bytes = nullptr);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Medians of `repeats` runs, after one warm-up run of each kind.
struct Cost {
  double forward_s = 0, train_s = 0;
  std::size_t train_bytes = 0;  // the largest over the runs
};
Cost measure(Layer layer, std::int64_t B, std::int64_t n, std::int64_t d, std::int64_t k,
             int repeats);
// The same for many layers at once, run in interleaved rounds (each round
// runs every layer once), so that a burst of load from other processes
// touches every point alike rather than one of them.
std::vector<Cost> measure_interleaved(const std::vector<LayerRun*>& runs, int repeats);
double median(std::vector<double> values);

// ---- the demo ----
//
// What `attn demo complexity` measures; the defaults are the demo's.
struct Plan {
  std::int64_t kernel = 3;  // the CNN's kernel size
  int repeats = 5;  // timed runs per point (the median is kept), after one warm-up
  int threads = 1;  // during the timings
  // Time and memory in n, every layer at d = d_for_n.
  std::vector<std::int64_t> n_values = {512, 724, 1024, 1448, 2048, 2896, 4096};
  std::int64_t d_for_n = 64;
  // Time in d: the CNN and the RNN at n = n_for_d, self-attention at
  // n = attention_n_for_d (large, so that n^2 d dominates its cost).
  std::vector<std::int64_t> d_values = {128, 181, 256, 362, 512, 724, 1024};
  std::int64_t n_for_d = 64;
  std::int64_t attention_n_for_d = 1024;
  // Batch sizes of the CNN and the RNN: over n small, so that the working
  // set of the largest n stays in the caches (at batch 8 the CNN's unfolded
  // input outgrows them and its time bends upwards, n^1.2); over d larger,
  // so that the products outweigh the per-step overhead of the GRU.
  // Self-attention runs one sequence.
  std::int64_t batch_for_n = 2, batch_for_d = 8, attention_batch = 1;
  // Maximum path length and sequential operations.
  std::vector<std::int64_t> path_n_values = {4, 8, 16, 32, 64, 128, 256};
  std::vector<std::int64_t> path_kernels = {3, 5, 9};
  std::vector<std::int64_t> sequential_n_values = {16, 64};
};

}  // namespace attn::examples::cnn_rnn_attention

namespace attn::examples {
struct Options;
// The section with another plan (tests run it small).
int complexity_with_plan(const Options& o, const cnn_rnn_attention::Plan& plan);
}  // namespace attn::examples
