// The fused GRU layer (ops/rnn.h) against its composite reference, forward
// and forward + backward, at d2l 10.4's shapes (T 10, batch 64, 32 hidden
// units; the decoder's layer takes one step at a time) and a larger one.
//
//   ATTN_NUM_THREADS=2 build/release/bench/rnn_bench
#include <benchmark/benchmark.h>

#include "attn/attn.h"

using namespace attn;

namespace {

struct Layer {
  Tensor X, h0, w_ih, w_hh, b_ih, b_hh;
};

Layer make(std::int64_t T, std::int64_t B, std::int64_t I, std::int64_t H) {
  Generator gen(1);
  auto r = [&](const Shape& s) { return uniform(-0.5, 0.5, s, gen, DType::f32); };
  Layer l{r({T, B, I}), r({B, H}), r({3 * H, I}), r({3 * H, H}), r({3 * H}), r({3 * H})};
  for (Tensor* t : {&l.X, &l.h0, &l.w_ih, &l.w_hh, &l.b_ih, &l.b_hh}) t->requires_grad_();
  return l;
}

// state.range: T, B, I, H, backward (0/1), fused (0/1)
void BM_Gru(benchmark::State& state) {
  const auto T = state.range(0), B = state.range(1), I = state.range(2), H = state.range(3);
  const bool backward = state.range(4) != 0, fused = state.range(5) != 0;
  Layer l = make(T, B, I, H);
  for (auto _ : state) {
    Tensor y = fused ? gru(l.X, l.h0, l.w_ih, l.w_hh, l.b_ih, l.b_hh)
                     : gru_reference(l.X, l.h0, l.w_ih, l.w_hh, l.b_ih, l.b_hh);
    if (backward) sum(y).backward();
    benchmark::DoNotOptimize(y.data<float>());
  }
  state.counters["threads"] = get_num_threads();
  state.SetLabel(fused ? "fused" : "composite reference");
}

void shapes(benchmark::internal::Benchmark* b) {
  for (auto fused : {1, 0})
    for (auto backward : {0, 1}) {
      b->Args({10, 64, 64, 32, backward, fused});  // d2l 10.4's decoder layer 1, whole sequence
      b->Args({1, 64, 64, 32, backward, fused});  // one decoding step
      b->Args({64, 32, 256, 256, backward, fused});
    }
}
BENCHMARK(BM_Gru)
    ->Apply(shapes)
    ->ArgNames({"T", "B", "I", "H", "bwd", "fused"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
