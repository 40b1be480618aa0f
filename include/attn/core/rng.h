// attn/core/rng.h — counter-based random numbers (Philox4x32-10).
//
// ref: Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC 2011).
// A Generator is (key = seed, counter = offset). Drawing n numbers consumes
// ceil(n / 4) counters, so any element of a draw can be regenerated from
// (seed, offset, index) alone: dropout recomputes its mask in backward this
// way, and a fused kernel can produce the mask of any tile without storing it.
#pragma once

#include <array>
#include <cstdint>

#include "attn/core/dtype.h"
#include "attn/core/shape.h"

namespace attn {

class Tensor;

// One Philox4x32-10 block: four 32-bit outputs for a 128-bit counter and 64-bit key.
std::array<std::uint32_t, 4> philox4x32(std::uint64_t counter_lo, std::uint64_t counter_hi,
                                        std::uint64_t key);

// Uniform float in [0, 1) from 32 random bits (24 bits of mantissa).
inline float uniform_from_bits(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// The i-th uniform [0, 1) number of the stream (seed, offset): what element i
// of a draw made at `offset` saw.
inline float philox_uniform(std::uint64_t seed, std::uint64_t offset, std::uint64_t i) {
  auto r = philox4x32(offset + i / 4, 0, seed);
  return uniform_from_bits(r[i % 4]);
}

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(std::uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  std::uint64_t seed() const { return seed_; }
  std::uint64_t offset() const { return offset_; }
  void set_offset(std::uint64_t offset) { offset_ = offset; }
  // Reserves n numbers and returns the offset they start at.
  std::uint64_t reserve(std::uint64_t n) {
    if (shard_.total != 0) return reserve_shard(n);
    std::uint64_t start = offset_;
    offset_ += (n + 3) / 4;
    return start;
  }

  // Data parallelism: a batch of `total` rows whose rows [first, first +
  // rows) this process computes. While one is set, every draw is taken to be
  // this process's rows of a draw over the whole batch, batch-major (n =
  // rows x numbers per row, as every dropout of the Transformer is): each
  // row takes whole Philox blocks of 4 numbers; the draw returns where this
  // process's rows start and advances the offset past the whole batch's
  // rows. So the processes of a data-parallel step draw disjoint parts of
  // one stream and all end at one offset; when the numbers per row are a
  // multiple of 4 they see the very numbers, and end at the very offset, of
  // one process drawing for the whole batch. {0, 0, 0}: none (the default).
  // InternalError for a draw whose size is not a multiple of `rows`.
  struct RowShard {
    std::uint64_t first = 0, rows = 0, total = 0;
  };
  void set_row_shard(RowShard shard);
  RowShard row_shard() const { return shard_; }

 private:
  std::uint64_t reserve_shard(std::uint64_t n);

  std::uint64_t seed_;
  std::uint64_t offset_ = 0;
  RowShard shard_;
};

// Sets a RowShard on `gen` for its lifetime (the one before is restored).
class RowShardScope {
 public:
  RowShardScope(Generator& gen, Generator::RowShard shard) : gen_(gen), before_(gen.row_shard()) {
    gen.set_row_shard(shard);
  }
  ~RowShardScope() { gen_.set_row_shard(before_); }
  RowShardScope(const RowShardScope&) = delete;
  RowShardScope& operator=(const RowShardScope&) = delete;

 private:
  Generator& gen_;
  Generator::RowShard before_;
};

// The process-wide generator that creation functions and dropout use by default.
Generator& default_generator();
void manual_seed(std::uint64_t seed);

// Random tensors (f32 or f64).
Tensor rand(const Shape& shape, Generator& gen, DType dtype = DType::f32);  // U[0, 1)
Tensor rand(const Shape& shape, DType dtype = DType::f32);
Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::f32);  // N(0, 1)
Tensor randn(const Shape& shape, DType dtype = DType::f32);
Tensor normal(double mean, double stddev, const Shape& shape, Generator& gen,
              DType dtype = DType::f32);
Tensor normal(double mean, double stddev, const Shape& shape, DType dtype = DType::f32);
Tensor uniform(double low, double high, const Shape& shape, Generator& gen,
               DType dtype = DType::f32);
// Random integers in [low, high).
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Generator& gen,
               DType dtype = DType::i64);

}  // namespace attn
