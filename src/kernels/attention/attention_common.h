// src/kernels/attention/attention_common.h — internal: what the attention kernels share:
// sizes, the per-thread workspace, the thread count, the dropout words.
//
// How the kernel headers are compiled. attention_table.h assembles the
// algorithms (attention_gemm.h, attention_flash.h, attention_small.h,
// attention_decode.h), each written once over a SIMD type V, into a kernel
// table. It is included by attention_portable.cpp (portable vectors, f32 and
// f64), attention_avx2.cpp and attention_avx512.cpp, each time after its own
// `#pragma GCC target`; everything defined in these headers has internal
// linkage, so the copies never meet at link time. The including file includes
// the headers below (the standard library and kernels/philox/philox_inline.h, whose
// inline function has external linkage) before its pragma, so that they stay
// compiled for the baseline: an out-of-line copy built for AVX-512 could
// otherwise be the one the linker keeps for every caller.
//
// V provides: T (element), R (register), W (lanes), kMR x kNV (the register
// block of the GEMM micro-kernel: kMR rows by kNV registers; optionally
// kFwdMR x kFwdNV, the tiled forward's own, attention_gemm.h), zero, set1,
// load, store, fma(a, b, c) = a * b + c, add, sub, mul, div, max, exp, hsum,
// optionally exp_n (exp of N registers in lock step, exp_block below),
// and optionally interleave / deinterleave, W rows to lane-interleaved
// vectors and back in registers (attention_transpose.h has scalar loops for
// a V without them).
#pragma once

#include <omp.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "attn/core/threads.h"
#include "kernels/attention/attention_kernel.h"
#include "kernels/philox/philox.h"
#include "kernels/philox/philox_inline.h"

// The names a kernel over the vector type V uses: its element, its register
// and its width (V's own, repeated in each kernel: a dependent base's names
// would need qualifying at every use).
#define ATTN_VEC_NAMES(V)  \
  using T = typename V::T; \
  using R = typename V::R; \
  static constexpr int W = V::W

namespace attn::detail {
namespace {

using i64 = std::int64_t;

inline i64 round_up(i64 x, i64 m) { return (x + m - 1) / m * m; }
inline i64 ceil_div(i64 x, i64 m) { return (x + m - 1) / m; }

// x[i] = V::exp(x[i]) for i < N: in V's lock-step form where it has one
// (exp_n, vec_avx2.h: N independent chains side by side), else one
// register after another. The same results either way. kSoftmax: the tiled
// forward's online softmax, which takes V's softmax_exp_n where V has one (a
// cheaper exp of other bits: vec_avx512.h, vec_avx2.h).
template <class V, int N, bool kSoftmax = false>
inline void exp_block(typename V::R* x) {
  if constexpr (kSoftmax && requires { V::template softmax_exp_n<N>(x); }) {
    V::template softmax_exp_n<N>(x);
  } else if constexpr (requires { V::template exp_n<N>(x); }) {
    V::template exp_n<N>(x);
  } else {
    for (int i = 0; i < N; ++i) x[i] = V::exp(x[i]);
  }
}

// dst + c * ld = exp(src + c * ld - m), one register each for c < n, four
// at a time through exp_block (src == dst is fine); returns the sum of the
// results, added in the order of c over kChains running sums (key c to sum
// c % kChains: two hide the latency of the adds), then those sums in order.
template <class V, int kChains = 1, bool kSoftmax = false>
inline typename V::R exp_shifted(const typename V::T* src, i64 n, i64 ld, typename V::R m,
                                 typename V::T* dst) {
  static_assert(kChains == 1 || kChains == 2);
  using R = typename V::R;
  R sum[kChains];
  for (int i = 0; i < kChains; ++i) sum[i] = V::zero();
  i64 c = 0;
  for (; c + 4 <= n; c += 4) {
    R p[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) p[i] = V::sub(V::load(src + (c + i) * ld), m);
    exp_block<V, 4, kSoftmax>(p);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      V::store(dst + (c + i) * ld, p[i]);
      sum[i % kChains] = V::add(sum[i % kChains], p[i]);
    }
  }
  for (; c < n; ++c) {
    R p = V::sub(V::load(src + c * ld), m);
    exp_block<V, 1, kSoftmax>(&p);
    V::store(dst + c * ld, p);
    sum[c % kChains] = V::add(sum[c % kChains], p);
  }
  return kChains == 1 ? sum[0] : V::add(sum[0], sum[kChains - 1]);
}

// sum_i x[i] y[i] over n: W partial sums across V's lanes, then their sum and
// the scalar tail.
template <class V>
typename V::T lane_dot(const typename V::T* x, const typename V::T* y, i64 n) {
  typename V::R acc = V::zero();
  i64 i = 0;
  for (; i + V::W <= n; i += V::W) acc = V::fma(V::load(x + i), V::load(y + i), acc);
  typename V::T sum = V::hsum(acc);
  for (; i < n; ++i) sum += x[i] * y[i];
  return sum;
}

// Below this many multiply-adds a call runs on one thread: forking costs more.
constexpr i64 kParallelWork = 1 << 17;

// The team a call of `work` multiply-adds is split for: every thread from
// kParallelWork on. Kernels that split keys into chunks by it (few heads,
// many threads) do so whatever the grain scale, so the bits do not depend on
// where the cores sit.
inline int team_size(i64 work) { return work >= kParallelWork ? omp_get_max_threads() : 1; }

// The threads that run it: team_size's, or 1 below kParallelWork times
// grain_scale() (the team's cores far apart, attn/core/threads.h).
inline int team_threads(i64 work) {
  return work >= kParallelWork * grain_scale() ? omp_get_max_threads() : 1;
}

// body() on every thread of a team of `threads` where threads > 1 and
// fork_ok(), else once on the calling thread, outside any region: a region of
// one thread still costs libgomp a futex system call (core/parallel.h). The
// body's worksharing loops (`#pragma omp for`) then run whole on this thread.
// Called from another team's thread, body gets a team of one of its own, so
// that its loops do not bind to that team.
template <class Body>
void run_team(int threads, Body body) {
  if (threads > 1 && fork_ok()) {
#pragma omp parallel num_threads(threads)
    body();
  } else if (omp_in_parallel()) {
#pragma omp parallel num_threads(1)
    body();
  } else {
    body();
  }
}

// Denormal results flushed to zero, and denormal operands read as zero, on
// this thread while an instance lives (the SSE control word's FTZ and DAZ),
// where `on`. A position bias (ALiBi's -m |i - j| reaches -255 over 512
// keys) leaves weights between 1e-38 and 1e-30 whose products with values
// and gradients are denormal, and each such product took a microcode assist:
// the ALiBi forward and backward at 512 keys ran 22% slower than with them
// flushed (2026-12-02, Intel Xeon model 167, 2 threads). Only the biased
// kernels flush, so the plain ones keep their bits.
class DenormalsAreZero {
 public:
  explicit DenormalsAreZero(bool on) : on_(on) {
#if defined(__x86_64__)
    if (on_) {
      saved_ = _mm_getcsr();
      _mm_setcsr(saved_ | 0x8040u);  // FTZ (bit 15) | DAZ (bit 6)
    }
#endif
  }
  ~DenormalsAreZero() {
#if defined(__x86_64__)
    if (on_) _mm_setcsr(saved_);
#endif
  }
  DenormalsAreZero(const DenormalsAreZero&) = delete;
  DenormalsAreZero& operator=(const DenormalsAreZero&) = delete;

 private:
  bool on_;
  unsigned saved_ = 0;
};

// y (D) = x turned by the rotary angles of position t (AttnArgs::rot_cos,
// rot_sin), pair by pair; sign -1 turns back. y may be x.
template <class T>
inline void turn_row(const AttnArgs<T>& a, const T* x, T* y, i64 t, T sign) {
  const i64 half = a.D / 2;
  const T* c = a.rot_cos + t * half;
  const T* s = a.rot_sin + t * half;
#pragma omp simd
  for (i64 i = 0; i < half; ++i) {
    const T u = x[2 * i], v = x[2 * i + 1], si = sign * s[i];
    y[2 * i] = u * c[i] - v * si;
    y[2 * i + 1] = u * si + v * c[i];
  }
}

// ---- workspace ----

// One buffer per calling thread, sliced per OpenMP thread, kept between calls
// (small calls allocate nothing) unless it grew past kKeepBytes. Allocated on
// the calling thread, so running out of memory throws std::bad_alloc there.
class Workspace {
 public:
  static constexpr std::size_t kKeepBytes = std::size_t{16} << 20;
  std::byte* get(std::size_t bytes) {
    if (bytes + 64 > cap_) {
      buf_.reset();
      buf_.reset(new std::byte[bytes + 64]);
      cap_ = bytes + 64;
    }
    auto p = reinterpret_cast<std::uintptr_t>(buf_.get());
    return buf_.get() + ((64 - p % 64) % 64);
  }
  void trim() {
    if (cap_ > kKeepBytes) {
      buf_.reset();
      cap_ = 0;
    }
  }

 private:
  std::unique_ptr<std::byte[]> buf_;
  std::size_t cap_ = 0;
};
thread_local Workspace tls_workspace;

// Hands out 64-byte aligned pieces of a slice; with base == nullptr it only
// counts, so the same code sizes the slice and carves it.
class Carver {
 public:
  explicit Carver(std::byte* base) : p_(base) {}
  template <class U>
  U* take(i64 n) {
    U* r = reinterpret_cast<U*>(p_);
    used_ += static_cast<std::size_t>(round_up(n * static_cast<i64>(sizeof(U)), 64));
    if (p_) p_ += round_up(n * static_cast<i64>(sizeof(U)), 64);
    return r;
  }
  // take<U>(n) for each of `pieces` in turn.
  template <class U, class... P>
  void take_each(i64 n, P&... pieces) {
    ((pieces = take<U>(n)), ...);
  }
  std::size_t used() const { return used_; }

 private:
  std::byte* p_;
  std::size_t used_ = 0;
};

// Asks for the n elements at x ahead of their use. Rows of the (B, T, H, D)
// layout lie H * D apart, a page or so for a real model, and a loop that
// copies them one after the other otherwise waits on every row's misses.
template <class T>
inline void prefetch_span(const T* x, i64 n) {
  const auto* p = reinterpret_cast<const char*>(x);
  for (i64 i = 0; i < n * static_cast<i64>(sizeof(T)); i += 64) __builtin_prefetch(p + i, 0, 3);
}

// The same for n elements about to be written (prefetchw where the target has it).
template <class T>
inline void prefetch_span_for_write(T* x, i64 n) {
  auto* p = reinterpret_cast<char*>(x);
  for (i64 i = 0; i < n * static_cast<i64>(sizeof(T)); i += 64) __builtin_prefetch(p + i, 1, 3);
}

// Rows kept this far ahead by the packing loops.
constexpr i64 kPrefetchRows = 8;

// ---- dropout mask (Philox: kernels/philox/philox.h) ----

// The random words of elements i0 .. i0 + len - 1 of the dropout stream;
// `buf` holds len + 8 words. Returns a pointer p with p[c] = word of i0 + c.
inline const std::uint32_t* dropout_words(const AttnDropout& dp, std::uint64_t i0, i64 len,
                                          std::uint32_t* buf) {
  const std::uint64_t first = i0 / 4;
  const i64 shift = static_cast<i64>(i0 % 4);
  const i64 nctr = (shift + len + 3) / 4;
  const std::uint64_t base = dp.offset + first;
  philox_words(base, dp.seed, nctr, buf);
  return buf + shift;
}

}  // namespace
}  // namespace attn::detail
