// Inverted dropout: forward kernel and backward rule.
//
//   keep_i = philox_uniform(seed, offset, i) >= p
//   y_i  = keep_i ? x_i / (1 - p) : 0
//   dx_i = keep_i ? g_i / (1 - p) : 0
//
// The mask is a pure function of (seed, offset, i), so the forward saves three
// numbers and the backward regenerates it instead of storing numel bytes.
// philox_uniform(...) = (bits >> 8) / 2^24 with 32 random bits, so the test
// u >= p is the exact integer test (bits >> 8) >= ceil(p 2^24).
//
// Kernel: Philox4x32-10 (the same function as core's philox4x32, in 16
// counters at a time: kernels/philox/philox.h) fills 4 bits words per counter for a
// chunk of counters, then one vectorized pass selects and scales.
#include "attn/ops/dropout.h"

#include <algorithm>
#include <cmath>

#include "attn/autograd/node.h"
#include "attn/core/threads.h"
#include "attn/ops/elementwise.h"
#include "core/parallel.h"
#include "kernels/philox/philox.h"
#include "kernels/vec/vec_math.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;

namespace {

constexpr std::int64_t kChunk = 256;  // counters per chunk = 1024 elements
// Philox costs about 20 vector instructions per 4 elements, so threads pay
// off on far fewer elements than for one arithmetic op (kParallelGrain).
constexpr std::int64_t kDropoutGrain = 8192;

// y_i = base_i + (keep_i ? x_i * scale : 0) for the 4 kChunk elements of
// chunk c (fewer in the last), i < n; base == nullptr: no base term. The sum
// is a second pass over the chunk's y (in L1): in one expression GCC may
// contract base + x * scale into one fused multiply-add, which rounds
// differently from dropout then add (it did where the select loop stayed
// scalar, as on AVX2: a product made on one branch only is control flow to
// GCC there, hence select_bits, vec_math.h).
template <class T>
void mask_chunk(const T* x, T* y, std::int64_t n, std::int64_t c, std::uint64_t seed,
                std::uint64_t offset, std::uint32_t threshold, T scale, const T* base) {
  alignas(64) std::uint32_t bits[4 * kChunk];
  const std::int64_t e0 = c * 4 * kChunk;
  const std::int64_t len = std::min<std::int64_t>(4 * kChunk, n - e0);
  const std::int64_t blocks = (len + 3) / 4;
  const std::uint64_t ctr0 = offset + static_cast<std::uint64_t>(c * kChunk);
  detail::philox_words(ctr0, seed, blocks, bits);
  const T* xs = x + e0;
  T* ys = y + e0;
#pragma omp simd
  for (std::int64_t i = 0; i < len; ++i)
    ys[i] = detail::select_bits((bits[i] >> 8) >= threshold, xs[i] * scale, T(0));
  if (base != nullptr) {
    const T* bs = base + e0;
#pragma omp simd
    for (std::int64_t i = 0; i < len; ++i) ys[i] = bs[i] + ys[i];
  }
}

// mask_chunk over every chunk of [0, n), split over the threads when large.
template <class T>
void apply_mask(const T* x, T* y, std::int64_t n, std::uint64_t seed, std::uint64_t offset,
                std::uint32_t threshold, T scale, const T* base = nullptr) {
  const std::int64_t chunks = (n + 4 * kChunk - 1) / (4 * kChunk);
  detail::parallel_for(
      chunks, detail::loop_threads(n >= kDropoutGrain * grain_scale()),
      [&](std::int64_t c) { mask_chunk(x, y, n, c, seed, offset, threshold, scale, base); });
}

Tensor masked_scale(const Tensor& x, std::uint64_t seed, std::uint64_t offset,
                    std::uint32_t threshold, double scale) {
  return dispatch_float(x.dtype(), "dropout", [&]<class T>() {
    Tensor xc = x.detach().contiguous();
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    apply_mask<T>(xc.data<T>(), y.data<T>(), x.numel(), seed, offset, threshold,
                  static_cast<T>(scale));
    return y;
  });
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  ATTN_CHECK(p >= 0.0 && p <= 1.0, ValueError, "dropout: p must be in [0, 1], got {}", p);
  ATTN_CHECK(is_floating(x.dtype()), DTypeError,
             "dropout: expected a floating dtype (f32 or f64), got {}", dtype_name(x.dtype()));
  if (!training || p == 0.0) return x;
  if (p == 1.0) {
    Shape shape = x.shape();
    return record(zeros(shape, x.dtype()), "dropout", {x}, [shape](const Tensor& g, const Needs&) {
      return Grads{zeros(shape, g.dtype())};
    });
  }
  const std::uint64_t seed = gen.seed();
  const std::uint64_t offset = gen.reserve(static_cast<std::uint64_t>(x.numel()));
  const auto threshold = static_cast<std::uint32_t>(std::ceil(p * 16777216.0));
  const double scale = 1.0 / (1.0 - p);
  Tensor y = masked_scale(x, seed, offset, threshold, scale);
  return record(y, "dropout", {x}, [seed, offset, threshold, scale](const Tensor& g, const Needs&) {
    return Grads{masked_scale(g, seed, offset, threshold, scale)};
  });
}

Tensor dropout(const Tensor& x, double p, bool training) {
  return dropout(x, p, training, default_generator());
}

Tensor dropout_add(const Tensor& base, const Tensor& x, double p, bool training, Generator& gen) {
  ATTN_CHECK(p >= 0.0 && p <= 1.0, ValueError, "dropout_add: p must be in [0, 1], got {}", p);
  ATTN_CHECK(base.shape() == x.shape() && base.dtype() == x.dtype(), ShapeError,
             "dropout_add: base {} {} and x {} {} must have the same shape and dtype",
             dtype_name(base.dtype()), shape_str(base.shape()), dtype_name(x.dtype()),
             shape_str(x.shape()));
  ATTN_CHECK(is_floating(x.dtype()), DTypeError,
             "dropout_add: expected a floating dtype (f32 or f64), got {}", dtype_name(x.dtype()));
  if (!training || p == 0.0 || p == 1.0) return add(base, dropout(x, p, training, gen));
  const std::uint64_t seed = gen.seed();
  const std::uint64_t offset = gen.reserve(static_cast<std::uint64_t>(x.numel()));
  const auto threshold = static_cast<std::uint32_t>(std::ceil(p * 16777216.0));
  const double scale = 1.0 / (1.0 - p);
  Tensor y = dispatch_float(x.dtype(), "dropout_add", [&]<class T>() {
    Tensor xc = x.detach().contiguous(), bc = base.detach().contiguous();
    Tensor out = Tensor::empty(x.shape(), x.dtype());
    apply_mask<T>(xc.data<T>(), out.data<T>(), x.numel(), seed, offset, threshold,
                  static_cast<T>(scale), bc.data<T>());
    return out;
  });
  return record(y, "dropout_add", {base, x},
                [seed, offset, threshold, scale](const Tensor& g, const Needs& n) {
                  return Grads{n[0] ? g : Tensor(),
                               n[1] ? masked_scale(g, seed, offset, threshold, scale) : Tensor()};
                });
}

Tensor dropout_add(const Tensor& base, const Tensor& x, double p, bool training) {
  return dropout_add(base, x, p, training, default_generator());
}

}  // namespace attn
