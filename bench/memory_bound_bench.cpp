// Memory-bound ops against a copy baseline, in GB/s (bytes read + written).
//
//   ATTN_NUM_THREADS=2 build/.../bench/memory_bound_bench
//
// Elementwise ops run on 16M f32 elements (64 MiB per tensor, far beyond the
// caches), softmax on 4096 x 4096. The baselines: memcpy on one thread, an
// OpenMP copy loop on all threads into a preallocated buffer, and the same
// loop into a freshly allocated tensor (as every op does for its output: a
// 64 MiB allocation is a fresh mmap, so each output page is faulted in and
// zeroed by the kernel on first touch).
#include <benchmark/benchmark.h>

#include <cstring>

#include "attn/attn.h"
#include "attn/ops/dropout.h"
#include "attn/ops/norm.h"
#include "attn/ops/softmax.h"
#include "kernels/vec/vec_math.h"
#include "ops/loops.h"

using namespace attn;

namespace {

constexpr std::int64_t kN = 16 << 20;  // 16M elements
constexpr std::int64_t kRows = 4096, kCols = 4096;

Tensor input(const Shape& shape, std::uint64_t seed) {
  Generator gen(seed);
  return uniform(-4.0, 4.0, shape, gen, DType::f32);
}

void set_bytes(benchmark::State& state, std::int64_t tensors_touched, std::int64_t n) {
  state.SetBytesProcessed(state.iterations() * tensors_touched * n *
                          static_cast<std::int64_t>(sizeof(float)));
  state.counters["threads"] = get_num_threads();
}

void parallel_copy(const float* src, float* dst, std::int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// ---- baselines ----

void BM_Memcpy(benchmark::State& state) {
  Tensor a = input({kN}, 1), b = zeros({kN});
  for (auto _ : state) {
    std::memcpy(b.data<float>(), a.data<float>(), kN * sizeof(float));
    benchmark::DoNotOptimize(b.data<float>());
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2, kN);
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_StreamCopy(benchmark::State& state) {
  Tensor a = input({kN}, 1), b = zeros({kN});
  for (auto _ : state) {
    parallel_copy(a.data<float>(), b.data<float>(), kN);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2, kN);
}
BENCHMARK(BM_StreamCopy)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_StreamCopyFreshOutput(benchmark::State& state) {
  Tensor a = input({kN}, 1);
  for (auto _ : state) {
    Tensor b = Tensor::empty({kN});
    parallel_copy(a.data<float>(), b.data<float>(), kN);
    benchmark::DoNotOptimize(b.data<float>());
  }
  set_bytes(state, 2, kN);
}
BENCHMARK(BM_StreamCopyFreshOutput)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- elementwise ops (each allocates its output) ----

void BM_Add(benchmark::State& state) {
  Tensor a = input({kN}, 1), b = input({kN}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
  set_bytes(state, 3, kN);
}
BENCHMARK(BM_Add)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MulScalar(benchmark::State& state) {
  Tensor a = input({kN}, 1);
  for (auto _ : state) benchmark::DoNotOptimize(mul(a, 2.0));
  set_bytes(state, 2, kN);
}
BENCHMARK(BM_MulScalar)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Exp(benchmark::State& state) {
  Tensor a = input({kN}, 1);
  for (auto _ : state) benchmark::DoNotOptimize(exp(a));
  set_bytes(state, 2, kN);
}
BENCHMARK(BM_Exp)->Unit(benchmark::kMillisecond)->UseRealTime();

// What attn::exp would do with the vectorizable exp of kernels/vec/vec_math.h.
void BM_ExpSimd(benchmark::State& state) {
  Tensor a = input({kN}, 1);
  for (auto _ : state)
    benchmark::DoNotOptimize(
        detail::unary_map<float>(a, [](float v) { return detail::exp_simd(v); }));
  set_bytes(state, 2, kN);
}
BENCHMARK(BM_ExpSimd)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Dropout(benchmark::State& state) {
  Tensor a = input({kN}, 1);
  Generator gen(0);
  for (auto _ : state) benchmark::DoNotOptimize(dropout(a, 0.1, true, gen));
  set_bytes(state, 2, kN);
}
BENCHMARK(BM_Dropout)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- row ops on 4096 x 4096 ----

void BM_SoftmaxForward(benchmark::State& state) {
  Tensor x = input({kRows, kCols}, 3);
  for (auto _ : state) benchmark::DoNotOptimize(softmax(x));
  set_bytes(state, 2, kRows * kCols);  // read x, write y
}
BENCHMARK(BM_SoftmaxForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SoftmaxReference(benchmark::State& state) {
  Tensor x = input({kRows, kCols}, 3);
  for (auto _ : state) benchmark::DoNotOptimize(softmax_reference(x));
  set_bytes(state, 2, kRows * kCols);
}
BENCHMARK(BM_SoftmaxReference)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SoftmaxForwardBackward(benchmark::State& state) {
  Tensor x = input({kRows, kCols}, 3), g = input({kRows, kCols}, 4);
  x.requires_grad_();
  for (auto _ : state) {
    x.zero_grad();
    softmax(x).backward(g);
    benchmark::DoNotOptimize(x.grad());
  }
  set_bytes(state, 5, kRows * kCols);  // forward: x, y; backward: g, y, dx
}
BENCHMARK(BM_SoftmaxForwardBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LayerNormForward(benchmark::State& state) {
  Tensor x = input({kRows, kCols}, 3), w = ones({kCols}), b = zeros({kCols});
  for (auto _ : state) benchmark::DoNotOptimize(layer_norm(x, w, b));
  set_bytes(state, 2, kRows * kCols);
}
BENCHMARK(BM_LayerNormForward)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
