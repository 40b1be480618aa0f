#include "attn/core/rng.h"

#include <cmath>
#include <numbers>

#include "attn/core/tensor.h"
#include "attn/core/threads.h"
#include "core/parallel.h"

namespace attn {

std::array<std::uint32_t, 4> philox4x32(std::uint64_t counter_lo, std::uint64_t counter_hi,
                                        std::uint64_t key) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  std::uint32_t c0 = static_cast<std::uint32_t>(counter_lo);
  std::uint32_t c1 = static_cast<std::uint32_t>(counter_lo >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(counter_hi);
  std::uint32_t c3 = static_cast<std::uint32_t>(counter_hi >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(key);
  std::uint32_t k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * c0;
    std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * c2;
    std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    std::uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

void Generator::set_row_shard(RowShard shard) {
  ATTN_CHECK(shard.total == 0 || (shard.rows > 0 && shard.first + shard.rows <= shard.total),
             ValueError, "Generator: rows [{}, {}) are not a part of a batch of {} rows",
             shard.first, shard.first + shard.rows, shard.total);
  shard_ = shard;
}

std::uint64_t Generator::reserve_shard(std::uint64_t n) {
  ATTN_CHECK(n % shard_.rows == 0, InternalError,
             "Generator: a draw of {} numbers cannot be split into rows of a batch of {} rows, "
             "{} of them here",
             n, shard_.total, shard_.rows);
  // Counters are blocks of 4 numbers, and each row gets whole blocks (its
  // count rounded up to a multiple of 4), so the parts never share a number;
  // when the count is a multiple of 4 (every draw of the Transformer at
  // d % 4 == 0) the parts are exactly the rows of the one-process draw.
  const std::uint64_t blocks_per_row = (n / shard_.rows + 3) / 4;
  const std::uint64_t start = offset_ + shard_.first * blocks_per_row;
  offset_ += shard_.total * blocks_per_row;
  return start;
}

namespace {

// Fills a contiguous float tensor with uniform [0, 1) numbers from the generator.
template <class T, class Map>
Tensor draw(const Shape& shape, Generator& gen, DType dtype, Map map, const char* op) {
  ATTN_CHECK(is_floating(dtype), DTypeError, "{}: expected f32 or f64, got {}", op,
             dtype_name(dtype));
  Tensor t = Tensor::empty(shape, dtype);
  std::int64_t n = t.numel();
  std::uint64_t seed = gen.seed(), start = gen.reserve(static_cast<std::uint64_t>(n));
  T* p = static_cast<T*>(t.raw_data());
  detail::parallel_for((n + 3) / 4, detail::loop_threads(n > 65536 * grain_scale()),
                       [&](std::int64_t blk) {
                         auto r = philox4x32(start + blk, 0, seed);
                         for (int j = 0; j < 4 && blk * 4 + j < n; ++j)
                           p[blk * 4 + j] = map(uniform_from_bits(r[j]));
                       });
  return t;
}

}  // namespace

Tensor uniform(double low, double high, const Shape& shape, Generator& gen, DType dtype) {
  return dispatch_float(dtype, "uniform", [&]<class T>() {
    return draw<T>(
        shape, gen, dtype, [&](float u) { return static_cast<T>(low + (high - low) * u); },
        "uniform");
  });
}

Tensor rand(const Shape& shape, Generator& gen, DType dtype) {
  return uniform(0, 1, shape, gen, dtype);
}
Tensor rand(const Shape& shape, DType dtype) { return rand(shape, default_generator(), dtype); }

Tensor normal(double mean, double stddev, const Shape& shape, Generator& gen, DType dtype) {
  ATTN_CHECK(stddev >= 0, ValueError, "normal: stddev must be >= 0, got {}", stddev);
  // Box–Muller on pairs of uniforms: element i uses uniforms 2i and 2i+1.
  Tensor u = rand({shape_numel(shape) * 2}, gen, DType::f64);
  Tensor t = Tensor::empty(shape, dtype);
  const double* pu = u.data<double>();
  dispatch_float(dtype, "normal", [&]<class T>() {
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      double u1 = 1.0 - pu[2 * i];  // (0, 1]
      double u2 = pu[2 * i + 1];
      double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
      p[i] = static_cast<T>(mean + stddev * z);
    }
  });
  return t;
}

Tensor normal(double mean, double stddev, const Shape& shape, DType dtype) {
  return normal(mean, stddev, shape, default_generator(), dtype);
}
Tensor randn(const Shape& shape, Generator& gen, DType dtype) {
  return normal(0, 1, shape, gen, dtype);
}
Tensor randn(const Shape& shape, DType dtype) { return randn(shape, default_generator(), dtype); }

Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Generator& gen,
               DType dtype) {
  ATTN_CHECK(high > low, ValueError, "randint: expected low < high, got [{}, {})", low, high);
  Tensor u = rand(shape, gen, DType::f64);
  Tensor t = Tensor::empty(shape, dtype);
  const double* pu = u.data<double>();
  dispatch_int(dtype, "randint", [&]<class T>() {
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      auto v = low + static_cast<std::int64_t>(pu[i] * static_cast<double>(high - low));
      p[i] = static_cast<T>(std::min(v, high - 1));
    }
  });
  return t;
}

}  // namespace attn
