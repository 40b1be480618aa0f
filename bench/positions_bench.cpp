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
//   Decode/<scheme>/<Tk>    one decoding step of one layer: the new key and
//                           value (fresh tensors, as the projection makes
//                           them) written into a cache of Tk keys, then one
//                           query per head against it, with the scheme's
//                           per-step work (the bias of Tk keys; rotary: the
//                           new key turned by rotary_heads before it is
//                           written, the query inside the kernel; gqa: the
//                           2 shared heads read in place)
//
//   KvCache/<kv heads>      the tatoeba recipe's decoder (3 layers, 4 heads
//                           of 64, rotary) decoding 16 tokens for 8
//                           sentences of 12 source tokens with 4, 2 or 1
//                           key/value heads: the bytes its caches hold,
//                           read from the state's tensors, per cached
//                           target token (self-attention) and per source
//                           token (cross-attention), all layers; the time
//                           is the 16 steps'
//
// Schemes: 0 plain, 1 rotary, 2 alibi, 3 relative, 4 gqa.
// Run with ATTN_NUM_THREADS=2; the overhead is each row's time over plain's.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

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
  if (scheme == alibi) o.position_bias = alibi_bias_kept(kHeads, K);
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
  const Tensor q = random({1, 1, kHeads, kDim}, 1), table = random({kHeads, 32}, 5),
               fresh_k = random({1, 1, kv, kDim}, 6), fresh_v = random({1, 1, kv, kDim}, 7);
  Tensor k = random({1, Tk, kv, kDim}, 2), v = random({1, Tk, kv, kDim}, 3);
  const Tensor pos = full({1}, static_cast<double>(Tk - 1), DType::i64);
  autograd::NoGradGuard no_grad;
  for (auto _ : state) {
    // The step's new key and value, as the projection hands them over, into
    // the cache's last slot; rotary turns the key first (the cache holds
    // turned keys) and the query inside the kernel.
    Tensor k_new = fresh_k.clone(), v_new = fresh_v.clone();
    if (scheme == rotary_scheme) k_new = rotary_heads(k_new, pos);
    copy_(k.narrow(1, Tk - 1, 1), k_new);
    copy_(v.narrow(1, Tk - 1, 1), v_new);
    Tensor out;
    if (scheme == rotary_scheme) {
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

void BM_KvCache(benchmark::State& state) {
  constexpr std::int64_t kRows = 8, kSource = 12, kSteps = 16;
  nn::TransformerConfig c;
  c.src_vocab_size = c.tgt_vocab_size = 100;
  c.num_hiddens = 256;
  c.num_heads = 4;
  c.num_layers = 3;
  c.ffn_num_hiddens = 1024;
  c.positions = nn::Positions::rotary;
  c.num_kv_heads = state.range(0);
  nn::EncoderDecoder net(c);
  net.eval();
  autograd::NoGradGuard no_grad;
  Generator gen(7);
  const Tensor src = randint(4, 100, {kRows, kSource}, gen);
  const Tensor lens = full({kRows}, static_cast<double>(kSource), DType::i64);
  const Tensor tokens = randint(4, 100, {kRows, 1}, gen);
  std::int64_t self_bytes = 0, cross_bytes = 0;
  for (auto _ : state) {
    nn::DecoderState s = net.begin(src, lens);
    for (std::int64_t t = 0; t < kSteps; ++t) benchmark::DoNotOptimize(net.step(tokens, s));
    const auto bytes = [](const Tensor& t) {
      return t.numel() * static_cast<std::int64_t>(dtype_size(t.dtype()));
    };
    self_bytes = cross_bytes = 0;
    for (std::size_t l = 0; l < s.self_k.size(); ++l) {
      self_bytes += bytes(s.self_k[l]) + bytes(s.self_v[l]);
      cross_bytes += bytes(s.cross_k[l]) + bytes(s.cross_v[l]);
    }
  }
  state.counters["bytes_per_target_token"] = static_cast<double>(self_bytes) / (kRows * kSteps);
  state.counters["bytes_per_source_token"] = static_cast<double>(cross_bytes) / (kRows * kSource);
  state.SetLabel(fmt::format("{} kv heads of 4", c.num_kv_heads));
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

BENCHMARK(BM_KvCache)->Arg(4)->Arg(2)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
