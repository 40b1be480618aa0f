// Scaled dot-product attention: the fused kernel against the materialized
// reference and against the GEMMs it contains.
//
//   Fused/<n>/<causal>          scaled_dot_product_attention, forward
//   FusedFwdBwd/<n>/<causal>    forward + backward (q, k, v require grad)
//   FusedBf16/..., FusedBf16FwdBwd/...   the same in a bf16 PrecisionScope
//   Reference/..., ReferenceFwdBwd/...   bmm, masked softmax, bmm (autograd)
//   SgemmAttention/<n>          the two products of unfused attention, one
//                               dnnl_sgemm per head each: S = Q K^T, O = S V
//   SgemmSquare/<n>             dnnl_sgemm on n x n x n: the machine's best GEMM rate
//   FmaPeak                     f32 multiply-adds from registers only on every
//                               thread of attn's team: the cores' FMA peak,
//                               measured beside the kernels (the clock the OS
//                               reports is not the cores' on every machine)
//   Tiny*                       d2l's Transformer shape: batch 64, 4 heads,
//                               10 steps, head dim 8 (B, T, H, D layout)
//   Decode*/<Tk>                one new query per head against a KV cache of
//                               Tk steps (B 1, 8 heads, head dim 64)
// Shapes: B = 1, H = 8 heads, head dim D = 64, Q = K = n, layout (B, T, H, D).
// Counter GFLOPS on wall-clock time, with the FlashAttention convention:
// forward 4 B H Q K D (two products of 2 Q K D each), halved when causal;
// backward 2.5 times the forward (five products), so forward + backward is
// 3.5 times the forward.
// Run with ATTN_NUM_THREADS=2 (the thread count of attn and oneDNN).
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.h>

#include "attn/attn.h"
#include "attn/ops/attention.h"
#include "attn/ops/precision.h"
#include "ops/thread_limit.h"

using namespace attn;

namespace {

constexpr std::int64_t kHeads = 8, kDim = 64;

Tensor random(const Shape& shape, std::uint64_t seed) {
  Generator gen(seed);
  return uniform(-1.0, 1.0, shape, gen, DType::f32);
}

double attention_flops(std::int64_t n, bool causal) {
  double f = 4.0 * kHeads * static_cast<double>(n) * static_cast<double>(n) * kDim;
  return causal ? f / 2 : f;
}

void set_gflops(benchmark::State& state, double flops) {
  state.counters["GFLOPS"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

using AttentionFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&,
                               const AttentionOptions&);

void forward(benchmark::State& state, AttentionFn fn) {
  const std::int64_t n = state.range(0);
  AttentionOptions opt;
  opt.causal = state.range(1) != 0;
  Tensor q = random({1, n, kHeads, kDim}, 1), k = random({1, n, kHeads, kDim}, 2),
         v = random({1, n, kHeads, kDim}, 3);
  for (auto _ : state) {
    Tensor out = fn(q, k, v, opt);
    benchmark::DoNotOptimize(out.data<float>());
  }
  set_gflops(state, attention_flops(n, opt.causal));
}

void forward_backward(benchmark::State& state, AttentionFn fn) {
  const std::int64_t n = state.range(0);
  AttentionOptions opt;
  opt.causal = state.range(1) != 0;
  Tensor q = random({1, n, kHeads, kDim}, 1), k = random({1, n, kHeads, kDim}, 2),
         v = random({1, n, kHeads, kDim}, 3), g = random({1, n, kHeads, kDim}, 4);
  for (const Tensor& t : {q, k, v}) t.requires_grad_();
  for (auto _ : state) {
    Tensor out = fn(q, k, v, opt);
    out.backward(g);
    benchmark::DoNotOptimize(q.grad().data<float>());
    for (const Tensor& t : {q, k, v}) t.zero_grad();
  }
  set_gflops(state, 3.5 * attention_flops(n, opt.causal));
}

void BM_Fused(benchmark::State& state) { forward(state, scaled_dot_product_attention); }
void BM_FusedFwdBwd(benchmark::State& state) {
  forward_backward(state, scaled_dot_product_attention);
}
// The same in a bf16 PrecisionScope: the tiled forward on AVX-512 BF16
// (attention_forward_bf16); the backward stays f32.
void BM_FusedBf16(benchmark::State& state) {
  if (!bf16_supported()) return state.SkipWithError("this CPU has no AVX-512 BF16");
  PrecisionScope scope(Precision::bf16);
  forward(state, scaled_dot_product_attention);
}
void BM_FusedBf16FwdBwd(benchmark::State& state) {
  if (!bf16_supported()) return state.SkipWithError("this CPU has no AVX-512 BF16");
  PrecisionScope scope(Precision::bf16);
  forward_backward(state, scaled_dot_product_attention);
}
void BM_Reference(benchmark::State& state) {
  forward(state, scaled_dot_product_attention_reference);
}
void BM_ReferenceFwdBwd(benchmark::State& state) {
  forward_backward(state, scaled_dot_product_attention_reference);
}

// Unfused attention's GEMMs per head: S (n x n) = Q K^T, O (n x D) = S V, read
// from the (1, n, H, D) layout in place (leading dimension H * D).
void BM_SgemmAttention(benchmark::State& state) {
  const std::int64_t n = state.range(0), ld = kHeads * kDim;
  Tensor q = random({1, n, kHeads, kDim}, 1), k = random({1, n, kHeads, kDim}, 2),
         v = random({1, n, kHeads, kDim}, 3);
  Tensor s = Tensor::empty({n, n}), o = Tensor::empty({1, n, kHeads, kDim});
  for (auto _ : state) {
    for (std::int64_t h = 0; h < kHeads; ++h) {
      dnnl_sgemm('N', 'T', n, n, kDim, 1.0f, q.data<float>() + h * kDim, ld,
                 k.data<float>() + h * kDim, ld, 0.0f, s.data<float>(), n);
      dnnl_sgemm('N', 'N', n, kDim, n, 1.0f, s.data<float>(), n, v.data<float>() + h * kDim, ld,
                 0.0f, o.data<float>() + h * kDim, ld);
    }
    benchmark::DoNotOptimize(o.data<float>());
  }
  set_gflops(state, attention_flops(n, false));
}

void BM_SgemmSquare(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Tensor a = random({n, n}, 1), b = random({n, n}, 2), c = Tensor::empty({n, n});
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data<float>(), n, b.data<float>(), n, 0.0f,
               c.data<float>(), n);
    benchmark::DoNotOptimize(c.data<float>());
  }
  set_gflops(state, 2.0 * static_cast<double>(n) * n * n);
}

// The FMA peak: every thread of attn's team runs 12 independent chains of
// fused multiply-adds on registers (enough to cover two units of latency 5),
// AVX-512 or AVX2 as the build targets; 2 FLOPs per lane per FMA.
#if defined(__AVX512F__)
using PeakReg = __m512;
constexpr int kPeakLanes = 16;
PeakReg peak_set1(float x) { return _mm512_set1_ps(x); }
PeakReg peak_fma(PeakReg a, PeakReg b, PeakReg c) { return _mm512_fmadd_ps(a, b, c); }
float peak_first(PeakReg x) { return _mm512_cvtss_f32(x); }
#define ATTN_BENCH_FMA_PEAK 1
#elif defined(__FMA__)
using PeakReg = __m256;
constexpr int kPeakLanes = 8;
PeakReg peak_set1(float x) { return _mm256_set1_ps(x); }
PeakReg peak_fma(PeakReg a, PeakReg b, PeakReg c) { return _mm256_fmadd_ps(a, b, c); }
float peak_first(PeakReg x) { return _mm256_cvtss_f32(x); }
#define ATTN_BENCH_FMA_PEAK 1
#endif

#ifdef ATTN_BENCH_FMA_PEAK
void BM_FmaPeak(benchmark::State& state) {
  constexpr int kChains = 12;
  constexpr std::int64_t kSteps = 1 << 20;
  const int threads = get_num_threads();
  float sink = 0;
  for (auto _ : state) {
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      PeakReg acc[kChains];
      for (int i = 0; i < kChains; ++i) acc[i] = peak_set1(static_cast<float>(i));
      const PeakReg a = peak_set1(0.999999f), b = peak_set1(1e-7f);
      for (std::int64_t s = 0; s < kSteps; ++s) {
#pragma GCC unroll 12
        for (int i = 0; i < kChains; ++i) acc[i] = peak_fma(acc[i], a, b);
      }
      float t = 0;
      for (int i = 0; i < kChains; ++i) t += peak_first(acc[i]);
      sink += t;
    }
    benchmark::DoNotOptimize(sink);
  }
  set_gflops(state, 2.0 * kPeakLanes * kChains * static_cast<double>(kSteps) * threads);
}
#endif

// d2l's Transformer: (batch 64, 10 steps, 4 heads, head dim 8), a decoder-style
// causal mask with valid lengths (arg 1) or the encoder's valid lengths (arg 0).
void tiny(benchmark::State& state, AttentionFn fn, bool backward) {
  const std::int64_t B = 64, T = 10, H = 4, D = 8;
  Tensor q = random({B, T, H, D}, 1), k = random({B, T, H, D}, 2), v = random({B, T, H, D}, 3),
         g = random({B, T, H, D}, 4);
  AttentionOptions opt;
  Generator gen(5);
  opt.valid_lens = randint(1, T + 1, {B}, gen);
  opt.causal = state.range(0) != 0;
  if (backward)
    for (const Tensor& t : {q, k, v}) t.requires_grad_();
  for (auto _ : state) {
    Tensor out = fn(q, k, v, opt);
    if (backward) {
      out.backward(g);
      for (const Tensor& t : {q, k, v}) t.zero_grad();
    }
    benchmark::DoNotOptimize(out.data<float>());
  }
  double f = 4.0 * B * H * T * T * D * (backward ? 3.5 : 1.0);
  set_gflops(state, opt.causal ? f / 2 : f);
}

void BM_TinyFused(benchmark::State& state) { tiny(state, scaled_dot_product_attention, false); }
void BM_TinyReference(benchmark::State& state) {
  tiny(state, scaled_dot_product_attention_reference, false);
}
void BM_TinyFusedFwdBwd(benchmark::State& state) {
  tiny(state, scaled_dot_product_attention, true);
}
void BM_TinyReferenceFwdBwd(benchmark::State& state) {
  tiny(state, scaled_dot_product_attention_reference, true);
}

// One query per head against a cache of Tk steps cut from a buffer of 2 Tk.
void decode(benchmark::State& state, AttentionFn fn) {
  const std::int64_t Tk = state.range(0), H = state.range(1);
  Tensor cache_k = random({1, 2 * Tk, H, kDim}, 1), cache_v = random({1, 2 * Tk, H, kDim}, 2);
  Tensor k = cache_k.narrow(1, 0, Tk), v = cache_v.narrow(1, 0, Tk);
  Tensor q = random({1, 1, H, kDim}, 3);
  AttentionOptions opt;
  opt.training = false;
  for (auto _ : state) {
    Tensor out = fn(q, k, v, opt);
    benchmark::DoNotOptimize(out.data<float>());
  }
  state.counters["GBps"] =
      benchmark::Counter(2.0 * static_cast<double>(Tk) * H * kDim * sizeof(float) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Decode(benchmark::State& state) { decode(state, attention_decode); }
void BM_DecodeReference(benchmark::State& state) {
  decode(state, scaled_dot_product_attention_reference);
}

// Batch translation's decode step: 32 rows, each one query per head against
// its own Tk cached steps (4 heads of 64, the tatoeba model), on one thread
// (as each batch of --inter-threads runs). Reports ns per (row, head) task.
void BM_DecodeBatch(benchmark::State& state) {
  const std::int64_t Tk = state.range(0), B = 32, H = 4;
  Tensor cache_k = random({B, 2 * Tk, H, kDim}, 1), cache_v = random({B, 2 * Tk, H, kDim}, 2);
  Tensor k = cache_k.narrow(1, 0, Tk), v = cache_v.narrow(1, 0, Tk);
  Tensor q = random({B, 1, H, kDim}, 3);
  AttentionOptions opt;
  opt.training = false;
  detail::ThreadLimit one(1);
  for (auto _ : state) {
    Tensor out = attention_decode(q, k, v, opt);
    benchmark::DoNotOptimize(out.data<float>());
  }
  state.counters["ns_per_task"] =
      benchmark::Counter(static_cast<double>(B * H), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {1024, 2048, 4096})
    for (std::int64_t causal : {0, 1}) b->Args({n, causal});
}

}  // namespace

BENCHMARK(BM_Fused)->Apply(sizes)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FusedFwdBwd)->Apply(sizes)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FusedBf16)->Apply(sizes)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FusedBf16FwdBwd)->Apply(sizes)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Reference)->Apply(sizes)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReferenceFwdBwd)->Apply(sizes)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SgemmAttention)
    ->Arg(1024)
    ->Arg(2048)
    ->Arg(4096)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SgemmSquare)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(2048)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
#ifdef ATTN_BENCH_FMA_PEAK
BENCHMARK(BM_FmaPeak)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif
BENCHMARK(BM_TinyFused)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TinyReference)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TinyFusedFwdBwd)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TinyReferenceFwdBwd)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decode)
    ->Args({4096, 8})
    ->Args({16384, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeBatch)->Arg(4)->Arg(10)->Arg(24)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeReference)
    ->Args({4096, 8})
    ->Args({16384, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
