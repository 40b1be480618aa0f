// The rates of the multiplies under the f32 and int8 products on AVX2: how
// many products per nanosecond this CPU's vector units allow each kind,
// without memory, so that a product kernel's speed can be read against its
// ceiling and the int8 kernel's lead over f32 against the CPU's own.
//
//   build/release/bench/multiply_rates_bench
//
// Each loop issues independent instructions on 256-bit registers (no chain
// between them), so its time is the throughput of the units they share:
//
// - fma: 8 vfmadd231ps, 64 f32 products (the f32 tiles' inner step; the
//   same loop on every thread is attention_bench's BM_FmaPeak);
// - maddubsw: 8 vpmaddubsw, 256 u8 x s8 products (pairs into int16);
// - int8_step: the AVX2 int8 kernel's step for 4 rows, 16 columns and 8 k
//   (kernels/gemm/int8_gemm_avx2.cpp: per row 4 vpmaddubsw, 2 vpaddw, 2
//   vpmaddwd by ones, 2 vpaddd), 512 products with the widening to int32;
// - maddubsw_fma: 4 vpmaddubsw beside 4 vfmadd231ps (whether the two share
//   a unit).
//
// The counter products is the rate (per second); int8_step / fma is the most
// the int8 kernel can gain over the f32 one on this CPU. Where vpmaddubsw and
// vpmaddwd issue on two ports (Intel's cores since Skylake) that ceiling is
// well above fma's; on AMD Zen 1 they issue on one 128-bit unit, a 256-bit
// instruction every other cycle, and int8_step is 1.3x fma
// (docs/design/precision.md).
#include <benchmark/benchmark.h>

#include <cstdint>

namespace {

bool has_avx2_fma() {
  return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
}

#define ATTN_RATE_CLOBBERS                                                                 \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", \
      "xmm11", "xmm12", "xmm13"

// One pass of each loop; the registers' contents do not matter (the rates
// of these instructions do not depend on their values).
__attribute__((target("avx2,fma"))) void fma_pass() {
  asm volatile(
      "vfmadd231ps %%ymm13, %%ymm12, %%ymm0\n\t"
      "vfmadd231ps %%ymm13, %%ymm12, %%ymm1\n\t"
      "vfmadd231ps %%ymm13, %%ymm12, %%ymm2\n\t"
      "vfmadd231ps %%ymm13, %%ymm12, %%ymm3\n\t"
      "vfmadd231ps %%ymm13, %%ymm12, %%ymm4\n\t"
      "vfmadd231ps %%ymm13, %%ymm12, %%ymm5\n\t"
      "vfmadd231ps %%ymm13, %%ymm12, %%ymm6\n\t"
      "vfmadd231ps %%ymm13, %%ymm12, %%ymm7" ::
          : ATTN_RATE_CLOBBERS);
}

__attribute__((target("avx2,fma"))) void maddubsw_pass() {
  asm volatile(
      "vpmaddubsw %%ymm13, %%ymm12, %%ymm0\n\t"
      "vpmaddubsw %%ymm13, %%ymm12, %%ymm1\n\t"
      "vpmaddubsw %%ymm13, %%ymm12, %%ymm2\n\t"
      "vpmaddubsw %%ymm13, %%ymm12, %%ymm3\n\t"
      "vpmaddubsw %%ymm13, %%ymm12, %%ymm4\n\t"
      "vpmaddubsw %%ymm13, %%ymm12, %%ymm5\n\t"
      "vpmaddubsw %%ymm13, %%ymm12, %%ymm6\n\t"
      "vpmaddubsw %%ymm13, %%ymm12, %%ymm7" ::
          : ATTN_RATE_CLOBBERS);
}

// Half a row's two steps of the int8 kernel (8 of its 16 columns) into sums
// ACC: the two steps' weights in ymm8, ymm9, the row's bytes broadcast in
// ymm12, ymm13, the ones in ymm0 (T, U: temporaries). Eight of them are the
// kernel's step for 4 rows.
#define ATTN_RATE_ROW(T, U, ACC)              \
  "vpmaddubsw %%ymm8, %%ymm12, %%ymm" #T      \
  "\n\t"                                      \
  "vpmaddubsw %%ymm9, %%ymm13, %%ymm" #U      \
  "\n\t"                                      \
  "vpaddw %%ymm" #U ", %%ymm" #T ", %%ymm" #T \
  "\n\t"                                      \
  "vpmaddwd %%ymm0, %%ymm" #T ", %%ymm" #T    \
  "\n\t"                                      \
  "vpaddd %%ymm" #T ", %%ymm" #ACC ", %%ymm" #ACC "\n\t"

__attribute__((target("avx2,fma"))) void int8_step_pass() {
  asm volatile(ATTN_RATE_ROW(1, 2, 3) ATTN_RATE_ROW(4, 5, 6) ATTN_RATE_ROW(7, 1, 14)
                   ATTN_RATE_ROW(2, 4, 15) ATTN_RATE_ROW(5, 7, 3) ATTN_RATE_ROW(1, 2, 6)
                       ATTN_RATE_ROW(4, 5, 14) ATTN_RATE_ROW(7, 1, 15)::
                           : ATTN_RATE_CLOBBERS, "xmm14", "xmm15");
}

__attribute__((target("avx2,fma"))) void maddubsw_fma_pass() {
  asm volatile(
      "vpmaddubsw %%ymm13, %%ymm12, %%ymm0\n\t"
      "vfmadd231ps %%ymm13, %%ymm12, %%ymm1\n\t"
      "vpmaddubsw %%ymm13, %%ymm12, %%ymm2\n\t"
      "vfmadd231ps %%ymm13, %%ymm12, %%ymm3\n\t"
      "vpmaddubsw %%ymm13, %%ymm12, %%ymm4\n\t"
      "vfmadd231ps %%ymm13, %%ymm12, %%ymm5\n\t"
      "vpmaddubsw %%ymm13, %%ymm12, %%ymm6\n\t"
      "vfmadd231ps %%ymm13, %%ymm12, %%ymm7" ::
          : ATTN_RATE_CLOBBERS);
}

template <void (*Pass)(), int Products>
void rate(benchmark::State& state) {
  if (!has_avx2_fma()) {
    state.SkipWithError("this CPU has no AVX2 and FMA");
    return;
  }
  constexpr int kPasses = 256;
  for (auto _ : state)
    for (int i = 0; i < kPasses; ++i) Pass();
  state.counters["products"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kPasses * Products, benchmark::Counter::kIsRate);
}

// maddubsw_fma counts the 4 vpmaddubsw's products (128) and the 4 FMAs'
// (32): where the two share no unit the pass takes the 4 vpmaddubsw's time
// alone (on Zen 1 as long as fma's 8 FMAs, 50 G/s), where they share one
// longer (there, 33).
BENCHMARK(rate<fma_pass, 64>)->Name("fma");
BENCHMARK(rate<maddubsw_pass, 256>)->Name("maddubsw");
BENCHMARK(rate<int8_step_pass, 512>)->Name("int8_step");
BENCHMARK(rate<maddubsw_fma_pass, 160>)->Name("maddubsw_fma");

}  // namespace

BENCHMARK_MAIN();
