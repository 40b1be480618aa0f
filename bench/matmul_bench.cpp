// Matrix products: attn::matmul against the GEMMs it could have been.
//
//   Square/<n>        attn::matmul (f32, contiguous), dnnl_sgemm called directly,
//                     OpenBLAS cblas_sgemm: C (n x n) = A @ B
//   Linear            attn::matmul (B, T, D) @ W^T (folded into one GEMM)
//                     against one direct dnnl_sgemm on (B*T, D) x (D, N)^T
//   SmallBatched      nb x (M x K) @ (K x M), e.g. 64 x (10 x 8) @ (8 x 10), the
//                     attention-score shape Q K^T: attn::bmm (one call of
//                     oneDNN's matmul primitive) against one dnnl_sgemm per
//                     item, serially and in parallel over the items (attn's
//                     fallback), and the bare primitive, kept or re-created
//   Int8Linear        y = linear(x, W, b) in int8 (ops/quantize.h), M x K by
//                     N x K: attn's kernel in force (AVX-512 VNNI, or AVX2;
//                     ATTN_NO_VNNI=1 forces AVX2's) inside a QuantizeScope,
//                     against oneDNN's u8 x s8 matmul primitive (packed
//                     weights, int32 sums) with the same quantization of x
//                     before it and the dequantization pass after it; GOPS
//                     counts 2 M N K, and `differ` the share of outputs
//                     whose bits are not the reference's (oneDNN's products
//                     without VNNI saturate pairs in int16 where |Wq| > 63:
//                     none in AVX2's 7 bits)
// Counter GFLOPS = 2*M*N*K per iteration / second / 1e9, on wall-clock time
// (the products run on several threads).
// Run with ATTN_NUM_THREADS=2 OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 (and
// optionally OPENBLAS_CORETYPE=SKYLAKEX to let OpenBLAS use its AVX-512 kernels).
#include <benchmark/benchmark.h>

#include <oneapi/dnnl/dnnl.h>
#include <cmath>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <vector>

#ifdef ATTN_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "attn/attn.h"
#include "attn/ops/matmul.h"
#include "attn/ops/precision.h"
#include "attn/ops/quantize.h"
#include "kernels/quantize/quantize_rows.h"
#include "ops/matmul_primitive.h"
#include "ops/quantize_internal.h"

using namespace attn;

namespace {

Tensor random(const Shape& shape, std::uint64_t seed) {
  Generator gen(seed);
  return uniform(-1.0, 1.0, shape, gen, DType::f32);
}

void set_gflops(benchmark::State& state, double m, double n, double k, double batch = 1) {
  state.counters["GFLOPS"] =
      benchmark::Counter(2e-9 * batch * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Square_Attn(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Tensor a = random({n, n}, 1), b = random({n, n}, 2);
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    benchmark::DoNotOptimize(c.data<float>());
  }
  set_gflops(state, n, n, n);
}

void BM_Square_Dnnl(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Tensor a = random({n, n}, 1), b = random({n, n}, 2);
  for (auto _ : state) {
    Tensor c = Tensor::empty({n, n});  // as attn::matmul does
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data<float>(), n, b.data<float>(), n, 0.0f,
               c.data<float>(), n);
    benchmark::DoNotOptimize(c.data<float>());
  }
  set_gflops(state, n, n, n);
}

#ifdef ATTN_HAVE_OPENBLAS
void BM_Square_OpenBLAS(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Tensor a = random({n, n}, 1), b = random({n, n}, 2);
  for (auto _ : state) {
    Tensor c = Tensor::empty({n, n});
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n,
                b.data<float>(), n, 0.0f, c.data<float>(), n);
    benchmark::DoNotOptimize(c.data<float>());
  }
  set_gflops(state, n, n, n);
}
#endif

// (B, T, D) @ W^T with W (N, D): nn::Linear.
constexpr std::int64_t kLinB = 32, kLinT = 20, kLinD = 256, kLinN = 256;

void BM_Linear_Attn(benchmark::State& state) {
  Tensor x = random({kLinB, kLinT, kLinD}, 1), w = random({kLinN, kLinD}, 2);
  for (auto _ : state) {
    Tensor y = matmul(x, w.transpose(0, 1));
    benchmark::DoNotOptimize(y.data<float>());
  }
  set_gflops(state, kLinB * kLinT, kLinN, kLinD);
}

void BM_Linear_Dnnl(benchmark::State& state) {
  Tensor x = random({kLinB, kLinT, kLinD}, 1), w = random({kLinN, kLinD}, 2);
  for (auto _ : state) {
    Tensor y = Tensor::empty({kLinB, kLinT, kLinN});
    dnnl_sgemm('N', 'T', kLinB * kLinT, kLinN, kLinD, 1.0f, x.data<float>(), kLinD, w.data<float>(),
               kLinD, 0.0f, y.data<float>(), kLinN);
    benchmark::DoNotOptimize(y.data<float>());
  }
  set_gflops(state, kLinB * kLinT, kLinN, kLinD);
}

// A decoding step's products on frozen weights: linear(x, W) with M rows
// inside a PrecisionScope given the weights (packed once: attn's own kernel
// in f32 on AVX-512 or AVX2 and in bf16 on AVX-512 BF16, oneDNN's packed
// matmul primitive where ATTN_ISA=portable is set, and in bf16 where
// ATTN_ISA=avx2 is), one call on each of 64 weights of
// 256 x 1024 in turn, 64 MB in f32: more than the last cache, as a
// translator's weights are, so each product finds its weight in memory (or
// in a shared last cache of hundreds of MB, where other machines' programs
// compete for it). With a third arg of 1, one weight of 1 MB again and
// again: it stays in L2, as a small model's weights do. "Unpacked" is the
// same products outside a scope. Args: M, bf16 (0/1), weights (default 64).
constexpr std::int64_t kFrozenWeights = 64, kFrozenN = 1024, kFrozenK = 256;

void frozen_linear(benchmark::State& state, bool packed) {
  const std::int64_t M = state.range(0);
  const bool bf16 = state.range(1) != 0;
  const std::int64_t weights = state.range(2);
  if (bf16 && !bf16_supported()) {
    state.SkipWithError("this CPU has no AVX-512 BF16");
    return;
  }
  std::vector<Tensor> ws;
  for (std::int64_t i = 0; i < weights; ++i)
    ws.push_back(random({kFrozenN, kFrozenK}, 100 + static_cast<std::uint64_t>(i)));
  Tensor x = random({M, kFrozenK}, 3);
  autograd::NoGradGuard no_grad;
  const Precision precision = bf16 ? Precision::bf16 : Precision::f32;
  std::optional<PrecisionScope> scope;
  if (packed) {
    scope.emplace(precision, ws);
    for (const Tensor& w : ws) linear(x, w);  // packs every weight once
  } else {
    scope.emplace(precision);
  }
  for (auto _ : state) {
    for (const Tensor& w : ws) {
      Tensor y = linear(x, w);
      benchmark::DoNotOptimize(y.data<float>());
    }
  }
  set_gflops(state, M, kFrozenN, kFrozenK, static_cast<double>(weights));
}

void BM_FrozenLinear_Packed(benchmark::State& state) { frozen_linear(state, true); }
void BM_FrozenLinear_Unpacked(benchmark::State& state) { frozen_linear(state, false); }

void frozen_args(benchmark::internal::Benchmark* b) {
  for (int bf16 : {0, 1})
    for (int m : {16, 32, 128}) b->Args({m, bf16, kFrozenWeights});
  for (int m : {12, 32, 128}) b->Args({m, 0, 1});
}

// The share of elements of a and b whose bits differ.
double share_differing(const Tensor& a, const Tensor& b) {
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < ac.numel(); ++i)
    n += std::memcmp(ac.data<float>() + i, bc.data<float>() + i, sizeof(float)) != 0;
  return ac.numel() > 0 ? static_cast<double>(n) / static_cast<double>(ac.numel()) : 0.0;
}

// Int8Linear: x (M, K) uniform in [-1, 1], W (N, K), b (N). Args: M, K, N.
void BM_Int8Linear_Attn(benchmark::State& state) {
  const std::int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  if (!int8_supported()) {
    state.SkipWithError("no int8 kernel here");
    return;
  }
  Tensor x = random({M, K}, 1), w = random({N, K}, 2), b = random({N}, 3);
  autograd::NoGradGuard no_grad;
  QuantizeScope scope({w, b});
  Tensor y = linear(x, w, b);  // quantizes and lays out W once
  for (auto _ : state) {
    y = linear(x, w, b);
    benchmark::DoNotOptimize(y.data<float>());
  }
  state.counters["differ"] = share_differing(y, linear_int8_reference(x, w, b));
  state.SetLabel(int8_kernel_name(int8_kernel()));
  state.counters["GOPS"] =
      benchmark::Counter(2e-9 * M * N * K, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Int8Linear_Dnnl(benchmark::State& state) {
  const std::int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  using dt = dnnl::memory::data_type;
  Tensor x = random({M, K}, 1), w = random({N, K}, 2), b = random({N}, 3);
  autograd::NoGradGuard no_grad;
  auto q = detail::quantize_weight(w, "bench");
  detail::PackedPrimitive* p = detail::packed_primitive(dt::u8, dt::s8, dt::s32, M, K, N);
  if (p == nullptr) {
    state.SkipWithError("oneDNN offers no u8 x s8 kernel here");
    return;
  }
  // W^T (K x N) read in place from Wq (N x K): strides (1, K).
  dnnl::memory packed = detail::pack_weights(dt::s8, q->q.data(), K, N, {1, K}, p->weights);
  std::vector<std::uint8_t> xq(static_cast<std::size_t>(M * K));
  std::vector<float> sx(static_cast<std::size_t>(M));
  std::vector<std::int32_t> acc(static_cast<std::size_t>(M * N));
  Tensor y = Tensor::empty({M, N});
  const float* px = x.data<float>();
  const float* pb = b.data<float>();
  const bool vnni = int8_kernel() == Int8Kernel::avx512_vnni;
  for (auto _ : state) {
    y = Tensor::empty({M, N});
    float* py = y.data<float>();
    // x as attn quantizes it for its kernel (7 bits on AVX2), into u8
    // (xq + 128).
#pragma omp parallel for
    for (std::int64_t m = 0; m < M; ++m) {
      std::uint8_t* row = xq.data() + m * K;
      if (vnni) {
        sx[m] = detail::quantize_row(px + m * K, K, row, true);
      } else {
        sx[m] = detail::quantize_row_as_run(px + m * K, K, reinterpret_cast<std::int8_t*>(row));
        for (std::int64_t k = 0; k < K; ++k) row[k] ^= 0x80;
      }
    }
    detail::run_packed_primitive(*p, xq.data(), packed, nullptr, acc.data());
#pragma omp parallel for
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n)
        py[m * N + n] =
            std::fma(static_cast<float>(acc[m * N + n] - q->comp[n]), sx[m] * q->scale[n], pb[n]);
    benchmark::DoNotOptimize(py);
  }
  state.counters["differ"] = share_differing(y, linear_int8_reference(x, w, b));
  state.SetLabel(p->impl);
  state.counters["GOPS"] =
      benchmark::Counter(2e-9 * M * N * K, benchmark::Counter::kIsIterationInvariantRate);
}

// The tatoeba model's products: K 256 into N 256 (attention) and 1,024 (the
// FFN's first), K 1,024 into 256 (its second), K 256 into 8,000 (the output
// layer); M a greedy step's rows of a batch (16, 64), a beam's, the
// encoder's (256).
void int8_args(benchmark::internal::Benchmark* b) {
  for (auto [k, n] : {std::array<std::int64_t, 2>{256, 256}, {256, 1024}, {1024, 256}, {256, 8000}})
    for (std::int64_t m : {16, 64, 256}) b->Args({m, k, n});
}

// Batches of small products (nb, M, K) @ (nb, K, N) with K read transposed, as
// attention scores Q K^T. Args: nb, M = N, K. 64 x (10 x 8) @ (8 x 10) is d2l's
// dot-product attention on (batch, queries, d) = (64, 10, 8); larger sizes show
// how the paths compare as the per-item work grows.
void small_batched(benchmark::State& state, int mode) {
  const std::int64_t nb = state.range(0), m = state.range(1), kk = state.range(2), n = m;
  Tensor q = random({nb, m, kk}, 1), k = random({nb, n, kk}, 2);
  const float* pq = q.data<float>();
  const float* pk = k.data<float>();
  for (auto _ : state) {
    Tensor s;
    if (mode == 0) {
      s = bmm(q, k.transpose(1, 2));
    } else {
      s = Tensor::empty({nb, m, n});
      float* ps = s.data<float>();
      // 1: one dnnl_sgemm per item, serially; 2: the same calls in parallel over items.
#pragma omp parallel for if (mode == 2)
      for (std::int64_t i = 0; i < nb; ++i)
        dnnl_sgemm('N', 'T', m, n, kk, 1.0f, pq + i * m * kk, kk, pk + i * n * kk, kk, 0.0f,
                   ps + i * m * n, n);
    }
    benchmark::DoNotOptimize(s.data<float>());
  }
  set_gflops(state, m, n, kk, nb);
}

// The same product as one call of oneDNN's matmul primitive (brgemm kernels),
// created once outside the loop, or each iteration (served by oneDNN's primitive cache).
void small_batched_primitive(benchmark::State& state, bool create_each_time) {
  const std::int64_t nb = state.range(0), m = state.range(1), kk = state.range(2), n = m;
  Tensor q = random({nb, m, kk}, 1), k = random({nb, n, kk}, 2);
  using dt = dnnl::memory::data_type;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  dnnl::memory::desc qd({nb, m, kk}, dt::f32, {m * kk, kk, 1});
  dnnl::memory::desc kd({nb, kk, n}, dt::f32, {n * kk, 1, kk});  // K^T read in place
  dnnl::memory::desc sd({nb, m, n}, dt::f32, {m * n, n, 1});
  auto make = [&] {
    return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(qd, kd, sd), eng));
  };
  dnnl::matmul prim = make();
  for (auto _ : state) {
    Tensor s = Tensor::empty({nb, m, n});
    if (create_each_time) prim = make();
    dnnl::memory qm(qd, eng, q.data<float>()), km(kd, eng, k.data<float>()),
        sm(sd, eng, s.data<float>());
    prim.execute(strm, {{DNNL_ARG_SRC, qm}, {DNNL_ARG_WEIGHTS, km}, {DNNL_ARG_DST, sm}});
    strm.wait();
    benchmark::DoNotOptimize(s.data<float>());
  }
  set_gflops(state, m, n, kk, nb);
}

void BM_SmallBatched_Attn(benchmark::State& state) { small_batched(state, 0); }
void BM_SmallBatched_DnnlPrimitive(benchmark::State& state) {
  small_batched_primitive(state, false);
}
void BM_SmallBatched_DnnlPrimitiveCached(benchmark::State& state) {
  small_batched_primitive(state, true);
}
void BM_SmallBatched_DnnlSerial(benchmark::State& state) { small_batched(state, 1); }
void BM_SmallBatched_DnnlParallel(benchmark::State& state) { small_batched(state, 2); }

void small_args(benchmark::internal::Benchmark* b) {
  for (auto [nb, m, k] : {std::array<std::int64_t, 3>{16, 10, 8},
                          {64, 10, 8},
                          {256, 10, 8},
                          {64, 16, 16},
                          {64, 32, 32},
                          {64, 64, 64},
                          {16, 128, 128},
                          {4, 256, 256}})
    b->Args({nb, m, k});
}

}  // namespace

BENCHMARK(BM_Square_Attn)->Arg(64)->Arg(256)->Arg(1024)->UseRealTime();
BENCHMARK(BM_Square_Dnnl)->Arg(64)->Arg(256)->Arg(1024)->UseRealTime();
#ifdef ATTN_HAVE_OPENBLAS
BENCHMARK(BM_Square_OpenBLAS)->Arg(64)->Arg(256)->Arg(1024)->UseRealTime();
#endif
BENCHMARK(BM_Linear_Attn)->UseRealTime();
BENCHMARK(BM_Linear_Dnnl)->UseRealTime();
BENCHMARK(BM_FrozenLinear_Packed)->Apply(frozen_args)->UseRealTime();
BENCHMARK(BM_FrozenLinear_Unpacked)->Apply(frozen_args)->UseRealTime();
BENCHMARK(BM_Int8Linear_Attn)->Apply(int8_args)->UseRealTime();
BENCHMARK(BM_Int8Linear_Dnnl)->Apply(int8_args)->UseRealTime();
BENCHMARK(BM_SmallBatched_Attn)->Apply(small_args)->UseRealTime();
BENCHMARK(BM_SmallBatched_DnnlSerial)->Apply(small_args)->UseRealTime();
BENCHMARK(BM_SmallBatched_DnnlParallel)->Apply(small_args)->UseRealTime();
BENCHMARK(BM_SmallBatched_DnnlPrimitive)->Apply(small_args)->UseRealTime();
BENCHMARK(BM_SmallBatched_DnnlPrimitiveCached)->Apply(small_args)->UseRealTime();

BENCHMARK_MAIN();
