// conv1d: the im2col fast path against its loop reference, and against the
// bare product it is built on (the cost of unfolding), in GFLOP/s
// (2 B n k d_in d_out per forward; the backward does two products of that size).
//
//   ATTN_NUM_THREADS=1 build/.../bench/conv_bench
#include <benchmark/benchmark.h>

#include "attn/attn.h"
#include "attn/ops/conv.h"

using namespace attn;

namespace {

Tensor input(const Shape& shape, std::uint64_t seed) {
  Generator gen(seed);
  return uniform(-1.0, 1.0, shape, gen, DType::f32);
}

// Args: B, n, d (= d_in = d_out), k.
struct Conv {
  std::int64_t B, n, d, k;
  explicit Conv(const benchmark::State& s)
      : B(s.range(0)), n(s.range(1)), d(s.range(2)), k(s.range(3)) {}
  double flops() const { return 2.0 * B * n * k * d * d; }
};

void set_flops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iteration * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.counters["threads"] = get_num_threads();
}

void BM_Conv1dForward(benchmark::State& state) {
  Conv c(state);
  Tensor X = input({c.B, c.n, c.d}, 1), w = input({c.d, c.d, c.k}, 2), b = input({c.d}, 3);
  for (auto _ : state) benchmark::DoNotOptimize(conv1d(X, w, b).raw_data());
  set_flops(state, c.flops());
}

void BM_Conv1dReference(benchmark::State& state) {
  Conv c(state);
  Tensor X = input({c.B, c.n, c.d}, 1), w = input({c.d, c.d, c.k}, 2), b = input({c.d}, 3);
  for (auto _ : state) benchmark::DoNotOptimize(conv1d_reference(X, w, b).raw_data());
  set_flops(state, c.flops());
}

// The product alone, on an already unfolded (B n, k d) input: the ceiling.
void BM_Conv1dProductOnly(benchmark::State& state) {
  Conv c(state);
  Tensor U = input({c.B * c.n, c.k * c.d}, 1), W = input({c.d, c.k * c.d}, 2), b = input({c.d}, 3);
  for (auto _ : state) benchmark::DoNotOptimize(linear(U, W, b).raw_data());
  set_flops(state, c.flops());
}

void BM_Conv1dForwardBackward(benchmark::State& state) {
  Conv c(state);
  Tensor X = input({c.B, c.n, c.d}, 1), w = input({c.d, c.d, c.k}, 2), b = input({c.d}, 3);
  Tensor g = input({c.B, c.n, c.d}, 4);
  for (const Tensor& t : {X, w, b}) t.requires_grad_();
  for (auto _ : state) {
    for (const Tensor& t : {X, w, b}) t.zero_grad();
    conv1d(X, w, b).backward(g);
    benchmark::DoNotOptimize(X.grad().raw_data());
  }
  set_flops(state, 3 * c.flops());
}

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({8, 256, 64, 3})->Args({8, 256, 256, 3})->Args({8, 64, 1024, 3})->Args({4, 512, 128, 9});
  b->ArgNames({"B", "n", "d", "k"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

BENCHMARK(BM_Conv1dForward)->Apply(shapes);
BENCHMARK(BM_Conv1dProductOnly)->Apply(shapes);
BENCHMARK(BM_Conv1dForwardBackward)->Apply(shapes);
BENCHMARK(BM_Conv1dReference)
    ->Args({8, 256, 64, 3})
    ->ArgNames({"B", "n", "d", "k"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
