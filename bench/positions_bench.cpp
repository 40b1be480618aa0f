// What relative positions and grouped heads cost the attention kernels, each
// against the plain kernel on the same shapes (B = 1, H = 8 heads, head dim
// 64, layout (B, T, H, D), causal, as a decoder's self-attention):
//
//   FwdBwd/<scheme>/<n>     forward + backward over n queries and keys, with
//                           what the scheme adds as the model runs it:
//                           rotary: q and k turned inside the kernels (and
//                           their gradients back); alibi: the bias built (alibi_bias) and
//                           added in the score tiles; relative: T5's table
//                           read by bucket (t5_bias) and its gradient summed
//                           by offset; gqa: 2 key/value heads for the 8
//   Decode/<scheme>/<Tk>    one new query per head against a cache of Tk keys,
//                           with the scheme's per-step work (the bias of Tk
//                           keys; rotary: the new key turned by rotary_heads,
//                           the query inside the kernel; gqa: the 2
//                           shared heads read in place)
//
// Schemes: 0 plain, 1 rotary, 2 alibi, 3 relative, 4 gqa.
// Run with ATTN_NUM_THREADS=2; the overhead is each row's time over plain's.
#include <benchmark/benchmark.h>

#include "attn/attn.h"
#include "attn/ops/attention.h"
#include "attn/ops/positions.h"

using namespace attn;

namespace {

constexpr std::int64_t kHeads = 8, kDim = 64, kKvHeads = 2;
enum Scheme { plain, rotary_scheme, alibi, relative, gqa };
const char* const kNames[] = {"plain", "rotary", "alibi", "relative", "gqa"};

Tensor random(const Shape& shape, std::uint64_t seed) {
  Generator gen(seed);
  return uniform(-1.0, 1.0, shape, gen, DType::f32);
}

// The attention of q (1, Q, 8, 64) over k, v (1, K, heads, 64) as the model
// runs it with `scheme`; queries at the last Q positions.
Tensor attend(Scheme scheme, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& table,
              bool causal) {
  AttentionOptions o;
  o.causal = causal;
  o.training = false;
  const std::int64_t K = k.size(1);
  o.rotary_queries = o.rotary_keys = scheme == rotary_scheme;
  if (scheme == alibi) o.position_bias = alibi_bias(kHeads, K);
  if (scheme == relative) o.position_bias = t5_bias(table, K, /*bidirectional=*/false);
  return scaled_dot_product_attention(q, k, v, o);
}

void BM_FwdBwd(benchmark::State& state) {
  const auto scheme = static_cast<Scheme>(state.range(0));
  const std::int64_t n = state.range(1), kv = scheme == gqa ? kKvHeads : kHeads;
  Tensor q = random({1, n, kHeads, kDim}, 1), k = random({1, n, kv, kDim}, 2),
         v = random({1, n, kv, kDim}, 3), g = random({1, n, kHeads, kDim}, 4);
  Tensor table = random({kHeads, 32}, 5);
  for (Tensor* t : {&q, &k, &v, &table}) t->requires_grad_();
  for (auto _ : state) {
    for (Tensor* t : {&q, &k, &v, &table}) t->zero_grad();
    Tensor out = attend(scheme, q, k, v, table, true);
    out.backward(g);
    benchmark::DoNotOptimize(q.grad().data<float>());
  }
  state.SetLabel(kNames[scheme]);
}

void BM_Decode(benchmark::State& state) {
  const auto scheme = static_cast<Scheme>(state.range(0));
  const std::int64_t Tk = state.range(1), kv = scheme == gqa ? kKvHeads : kHeads;
  const Tensor q = random({1, 1, kHeads, kDim}, 1), k = random({1, Tk, kv, kDim}, 2),
               v = random({1, Tk, kv, kDim}, 3), table = random({kHeads, 32}, 5);
  autograd::NoGradGuard no_grad;
  for (auto _ : state) {
    // Rotary turns only the new key per step (the cache holds turned keys).
    Tensor out;
    if (scheme == rotary_scheme) {
      const Tensor pos = full({1}, static_cast<double>(Tk - 1), DType::i64);
      const Tensor k_new = rotary_heads(k.narrow(1, Tk - 1, 1), pos);
      benchmark::DoNotOptimize(k_new.data<float>());
      AttentionOptions o;
      o.training = false;
      o.rotary_queries = true;
      out = scaled_dot_product_attention(q, k, v, o);
    } else {
      out = attend(scheme, q, k, v, table, false);
    }
    benchmark::DoNotOptimize(out.data<float>());
  }
  state.SetLabel(kNames[scheme]);
}

void schemes(benchmark::internal::Benchmark* b, std::initializer_list<std::int64_t> sizes) {
  for (std::int64_t n : sizes)
    for (int s = plain; s <= gqa; ++s) b->Args({s, n});
}

}  // namespace

BENCHMARK(BM_FwdBwd)->Apply([](auto* b) {
                      schemes(b, {128, 512});
                    }) -> UseRealTime() -> Unit(benchmark::kMillisecond);
BENCHMARK(BM_Decode)->Apply([](auto* b) {
                      schemes(b, {256, 2048});
                    }) -> UseRealTime() -> Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
