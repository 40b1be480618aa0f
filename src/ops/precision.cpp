// bf16 mixed precision: the thread's setting, the f32 -> bf16 conversion
// (reference and AVX-512 BF16 kernel) and the frozen weights' bf16 copies.
#include "attn/ops/precision.h"
#include "attn/core/env.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <tuple>

#include <dnnl.hpp>

#include "attn/core/error.h"
#include "attn/core/storage.h"
#include "attn/core/threads.h"
#include "core/parallel.h"
#include "kernels/gemm/bf16_gemm.h"
#include "ops/onednn_isa.h"
#include "ops/precision_internal.h"

namespace attn {

// The bf16 copies and packed layouts of frozen parameters, kept by the
// outermost scope given them and by the scopes that joined it (other
// threads): `mu` guards `copies`; the packed store has its own lock.
struct PrecisionScope::Frozen : std::enable_shared_from_this<PrecisionScope::Frozen> {
  std::set<const void*> storages;  // the frozen parameters' storages (read only)
  std::vector<Tensor> keep;  // keeps those storages (and their addresses) alive
  std::mutex mu;
  // (storage, first element, span) -> bits, in buffers of attn's allocator:
  // a training step's scope takes the blocks the previous step's gave back,
  // not fresh pages (nor zeroed ones) for every weight.
  std::map<std::tuple<const void*, const float*, std::int64_t>, std::unique_ptr<Storage>> copies;
  std::shared_ptr<detail::PackedStore> packed = detail::new_packed_store();
};

namespace {

thread_local Precision t_precision = Precision::f32;

thread_local PrecisionScope::Frozen* t_frozen = nullptr;

thread_local const detail::Bf16Reuse* t_reuse = nullptr;  // the innermost open one

// 32 floats a step with VCVTNE2PS2BF16 (round to nearest even; subnormals to
// zero, NaN quieted, as the reference); the tail through a mask.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void to_bf16_avx512(
    const float* x, std::uint16_t* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(x + i), hi = _mm512_loadu_ps(x + i + 16);
    _mm512_storeu_si512(out + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
  for (; i < n; i += 16) {
    const std::int64_t left = std::min<std::int64_t>(16, n - i);
    const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    _mm256_mask_storeu_epi16(out + i, m, (__m256i)_mm512_cvtneps_pbh(v));
  }
}

// bf16_dot_rate's two loops: `iters` rounds of 12 instructions on 12
// independent accumulators (enough to keep two units busy through a
// latency of 4-6 cycles), all operands zero (no subnormals); each returns
// the seconds its rounds took. Written in assembly so that no build (-O0,
// a sanitizer's -O1) moves the accumulators to memory: with them there,
// both loops wait on stores and the ratio reads 2 whatever the CPU.
// clang-format off
#define ATTN_RATE_ZERO(r) "vpxord %%zmm" #r ", %%zmm" #r ", %%zmm" #r "\n\t"
#define ATTN_RATE_OP(op, r) op " %%zmm13, %%zmm12, %%zmm" #r "\n\t"
#define ATTN_RATE_12(X, ...)                                                                 \
  X(__VA_ARGS__ 0) X(__VA_ARGS__ 1) X(__VA_ARGS__ 2) X(__VA_ARGS__ 3) X(__VA_ARGS__ 4)      \
  X(__VA_ARGS__ 5) X(__VA_ARGS__ 6) X(__VA_ARGS__ 7) X(__VA_ARGS__ 8) X(__VA_ARGS__ 9)      \
  X(__VA_ARGS__ 10) X(__VA_ARGS__ 11)
#define ATTN_RATE_LOOP(op, n)                                                                \
  asm volatile(ATTN_RATE_12(ATTN_RATE_ZERO) ATTN_RATE_ZERO(12) ATTN_RATE_ZERO(13)            \
               "1:\n\t" ATTN_RATE_12(ATTN_RATE_OP, op, ) "dec %0\n\t" "jnz 1b\n\t"          \
               : "+r"(n)                                                                     \
               :                                                                             \
               : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",       \
                 "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13")
// clang-format on

__attribute__((target("avx512f"), noinline)) double time_f32_fmas(long iters) {
  const auto t0 = std::chrono::steady_clock::now();
  ATTN_RATE_LOOP("vfmadd231ps", iters);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

__attribute__((target("avx512f,avx512bf16"), noinline)) double time_bf16_dots(long iters) {
  const auto t0 = std::chrono::steady_clock::now();
  ATTN_RATE_LOOP("vdpbf16ps", iters);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

#undef ATTN_RATE_LOOP
#undef ATTN_RATE_12
#undef ATTN_RATE_OP
#undef ATTN_RATE_ZERO

// The fastest of 9 interleaved runs of each loop (a run the scheduler or an
// interrupt stretched is not the fastest), after one of each to warm the
// 512-bit units. A round of FMAs is 16 multiply-adds a chain, of VDPBF16PS 32.
double measure_bf16_dot_rate() {
  constexpr long kIters = 2000;  // 24,000 instructions a run: 5-25 us
  double f32 = time_f32_fmas(kIters), bf16 = time_bf16_dots(kIters);
  for (int trial = 0; trial < 9; ++trial) {
    f32 = std::min(f32, time_f32_fmas(kIters));
    bf16 = std::min(bf16, time_bf16_dots(kIters));
  }
  if (!(f32 > 0) || !(bf16 > 0)) return 1.0;  // a clock too coarse to tell: claim nothing
  return 2.0 * f32 / bf16;
}

}  // namespace

double bf16_dot_rate() {
  static const double rate = bf16_supported() ? measure_bf16_dot_rate() : 0.0;
  return rate;
}

bool bf16_products_on_amx() { return detail::onednn_isa_has(dnnl::cpu_isa::avx512_core_amx); }

bool bf16_slower_than_f32() {
  return bf16_supported() && !bf16_products_on_amx() && bf16_dot_rate() < 1.0;
}

const char* precision_name(Precision p) { return enum_name(p); }

Precision parse_precision(const std::string& text) { return parse_enum<Precision>(text); }

bool bf16_supported() {
  static const bool supported = [] {
    if (env_flag(EnvVar::no_bf16)) return false;
    return detail::bf16_cpu_has();
  }();
  return supported;
}

Precision matmul_precision() { return t_precision; }

PrecisionScope::PrecisionScope(Precision p, const std::vector<Tensor>& frozen)
    : previous_(t_precision), previous_frozen_(t_frozen) {
  ATTN_CHECK(p != Precision::bf16 || bf16_supported(), ValueError,
             "bf16 precision needs a CPU with AVX-512 BF16, which this one lacks");
  if (!frozen.empty() && t_frozen == nullptr) {
    frozen_ = std::make_shared<Frozen>();
    for (const Tensor& t : frozen) {
      if (!t.defined() || t.dtype() != DType::f32) continue;
      frozen_->storages.insert(t.storage().get());
      frozen_->keep.push_back(t);
    }
    t_frozen = frozen_.get();
  }
  t_precision = p;
}

PrecisionScope::PrecisionScope(const Shared& shared)
    : previous_(t_precision), previous_frozen_(t_frozen), frozen_(shared.frozen) {
  ATTN_CHECK(shared.precision != Precision::bf16 || bf16_supported(), ValueError,
             "bf16 precision needs a CPU with AVX-512 BF16, which this one lacks");
  t_precision = shared.precision;
  t_frozen = frozen_.get();
}

PrecisionScope::~PrecisionScope() {
  t_precision = previous_;
  t_frozen = previous_frozen_;
}

PrecisionScope::Shared PrecisionScope::current() {
  return {t_precision, t_frozen != nullptr ? t_frozen->shared_from_this() : nullptr};
}

std::uint16_t to_bf16_reference(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const std::uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  if (mag < 0x00800000u) return static_cast<std::uint16_t>((u >> 16) & 0x8000u);  // zero, subnormal
  u += 0x7fffu + ((u >> 16) & 1u);  // nearest, ties to even (infinity stays infinity)
  return static_cast<std::uint16_t>(u >> 16);
}

void to_bf16(const float* x, std::uint16_t* out, std::int64_t n) {
  if (n <= 0) return;
  // Memory-bound: split across the threads above 64 Ki elements, in chunks
  // of whole 32-element vectors.
  constexpr std::int64_t kGrain = 1 << 16;
  const int threads =
      n >= 2 * kGrain * grain_scale() && !omp_in_parallel() ? omp_get_max_threads() : 1;
  const std::int64_t chunk = ((n + threads - 1) / threads + 31) / 32 * 32;
  detail::parallel_for(threads, threads > 1 && fork_ok() ? threads : 1, [&](std::int64_t t) {
    const std::int64_t lo = std::min(n, t * chunk), len = std::min(n, lo + chunk) - lo;
    if (len <= 0) return;
    if (bf16_supported()) {
      to_bf16_avx512(x + lo, out + lo, len);
    } else {
      for (std::int64_t i = lo; i < lo + len; ++i) out[i] = to_bf16_reference(x[i]);
    }
  });
}

Tensor round_to_bf16(const Tensor& x) {
  ATTN_CHECK(x.defined() && x.dtype() == DType::f32, DTypeError,
             "round_to_bf16: expected an f32 tensor");
  Tensor c = x.detach().contiguous().clone();
  float* p = c.data<float>();
  for (std::int64_t i = 0; i < c.numel(); ++i) p[i] = from_bf16(to_bf16_reference(p[i]));
  return c;
}

namespace detail {

std::int64_t storage_span(const Tensor& x) {
  if (x.numel() == 0) return 0;
  std::int64_t span = 1;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    if (x.strides()[d] < 0) return -1;
    span += (x.shape()[d] - 1) * x.strides()[d];
  }
  return span;
}

bool frozen_parameter(const Tensor& x) {
  return t_frozen != nullptr && t_frozen->storages.count(x.storage().get()) > 0;
}

PackedStore* frozen_packed_store() {
  return t_frozen != nullptr ? t_frozen->packed.get() : nullptr;
}

Bf16Reuse::Bf16Reuse(const Tensor& x, const std::uint16_t* bits)
    : storage_(x.storage().get()),
      first_(x.data<float>()),
      span_(storage_span(x)),
      bits_(bits),
      outer_(t_reuse) {
  t_reuse = this;
}

Bf16Reuse::~Bf16Reuse() { t_reuse = outer_; }

const std::uint16_t* Bf16Reuse::find(const void* storage, const float* first, std::int64_t span) {
  for (const Bf16Reuse* r = t_reuse; r != nullptr; r = r->outer_)
    if (r->first_ == first && r->span_ == span && r->storage_ == storage) return r->bits_;
  return nullptr;
}

void to_bf16_with_column_sums(const float* x, std::int64_t M, std::int64_t N, std::uint16_t* out,
                              float* colsum, const float* relu_out, float* masked) {
  ATTN_CHECK((relu_out == nullptr) == (masked == nullptr), InternalError,
             "to_bf16_with_column_sums: the ReLU's output and the masked rows go together");
  if (M <= 0 || N <= 0) {
    if (colsum) std::fill(colsum, colsum + std::max<std::int64_t>(N, 0), 0.0f);
    return;
  }
  // Blocks of 64 rows: enough of them to share over the threads.
  constexpr std::int64_t kBlockRows = 64;
  const std::int64_t blocks = (M + kBlockRows - 1) / kBlockRows;
  thread_local std::vector<float> partial;
  if (colsum && partial.size() < static_cast<std::size_t>(blocks * N))
    partial.resize(static_cast<std::size_t>(blocks * N));
  float* part = partial.data();
  const bool parallel = M * N >= 2 * (std::int64_t(1) << 16) * grain_scale() && blocks > 1;
  detail::parallel_for(blocks, detail::loop_threads(parallel), [&](std::int64_t blk) {
    const std::int64_t r0 = blk * kBlockRows, r1 = std::min(M, r0 + kBlockRows);
    const std::int64_t len = (r1 - r0) * N;
    const float* xs = x + r0 * N;
    if (relu_out) {
      const float* ys = relu_out + r0 * N;
      float* ms = masked + r0 * N;
#pragma omp simd
      for (std::int64_t i = 0; i < len; ++i) ms[i] = ys[i] > 0 ? xs[i] : 0.0f;
      xs = ms;
    }
    if (bf16_supported()) {
      to_bf16_avx512(xs, out + r0 * N, len);
    } else {
      for (std::int64_t i = 0; i < len; ++i) out[r0 * N + i] = to_bf16_reference(xs[i]);
    }
    if (!colsum) return;
    float* ps = part + blk * N;
    std::fill(ps, ps + N, 0.0f);
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* row = xs + (r - r0) * N;
#pragma omp simd
      for (std::int64_t j = 0; j < N; ++j) ps[j] += row[j];
    }
  });
  if (!colsum) return;
  // Columns in chunks over the threads; each column adds its blocks in order.
  constexpr std::int64_t kCols = 256;
  const std::int64_t chunks = (N + kCols - 1) / kCols;
  detail::parallel_for(chunks, detail::loop_threads(parallel && chunks > 1), [&](std::int64_t c) {
    const std::int64_t j0 = c * kCols, j1 = std::min(N, j0 + kCols);
    std::copy(part + j0, part + j1, colsum + j0);
    for (std::int64_t b = 1; b < blocks; ++b) {
      const float* ps = part + b * N;
#pragma omp simd
      for (std::int64_t j = j0; j < j1; ++j) colsum[j] += ps[j];
    }
  });
}

const std::uint16_t* bf16_span(const Tensor& x, std::int64_t span,
                               std::vector<std::uint16_t>& scratch) {
  const float* p = x.data<float>();
  if (const std::uint16_t* bits = Bf16Reuse::find(x.storage().get(), p, span)) return bits;
  if (t_frozen != nullptr && t_frozen->storages.count(x.storage().get()) > 0) {
    auto key = std::make_tuple(static_cast<const void*>(x.storage().get()), p, span);
    std::lock_guard<std::mutex> lock(t_frozen->mu);  // the first use converts, under the lock
    auto it = t_frozen->copies.find(key);
    if (it == t_frozen->copies.end()) {
      auto bits = std::make_unique<Storage>(static_cast<std::size_t>(span) * sizeof(std::uint16_t));
      to_bf16(p, static_cast<std::uint16_t*>(bits->data()), span);
      it = t_frozen->copies.emplace(key, std::move(bits)).first;
    }
    return static_cast<const std::uint16_t*>(it->second->data());
  }
  if (scratch.size() < static_cast<std::size_t>(span))
    scratch.resize(static_cast<std::size_t>(span));
  to_bf16(p, scratch.data(), span);
  return scratch.data();
}

}  // namespace detail

}  // namespace attn
