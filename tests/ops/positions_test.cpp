// Rotary embeddings, ALiBi's slopes and T5's buckets (attn/ops/positions.h).
// The gradient check and the f32-against-f64 comparison of rotary are in the
// op-case table (tests/ops/op_cases.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attn/attn.h"

using namespace attn;

namespace {

Tensor random64(const Shape& shape, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Tensor t = Tensor::empty(shape, DType::f64);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = u(gen);
  return t;
}

// Row t of x (T, D) rotated by the plain formula, position start + t.
double rotated(const Tensor& x, std::int64_t t, std::int64_t d, std::int64_t start, double base) {
  const std::int64_t D = x.size(1), i = d / 2;
  const double angle =
      static_cast<double>(start + t) * std::pow(base, -2.0 * static_cast<double>(i) / D);
  const double a = x.data<double>()[t * D + 2 * i], b = x.data<double>()[t * D + 2 * i + 1];
  return d % 2 == 0 ? a * std::cos(angle) - b * std::sin(angle)
                    : a * std::sin(angle) + b * std::cos(angle);
}

double dot_rows(const Tensor& a, std::int64_t i, const Tensor& b, std::int64_t j) {
  const std::int64_t D = a.size(-1);
  double s = 0;
  for (std::int64_t d = 0; d < D; ++d)
    s += a.data<double>()[i * D + d] * b.data<double>()[j * D + d];
  return s;
}

}  // namespace

TEST(Rotary, RotatesEachPairByPositionTimesTheta) {
  const Tensor x = random64({9, 12}, 1);
  for (double base : {10000.0, 500.0}) {
    const Tensor y = rotary(x, 4, base);
    for (std::int64_t t = 0; t < 9; ++t)
      for (std::int64_t d = 0; d < 12; ++d)
        EXPECT_NEAR(y.data<double>()[t * 12 + d], rotated(x, t, d, 4, base), 1e-14)
            << "row " << t << ", value " << d << ", base " << base;
  }
}

// What makes rotary relative: q at i and k at j score the same as at i + s
// and j + s.
TEST(Rotary, ScoresDependOnlyOnTheOffset) {
  const Tensor q = random64({1, 16}, 2), k = random64({1, 16}, 3);
  double worst = 0;
  for (std::int64_t i = 0; i < 40; i += 3)
    for (std::int64_t j = 0; j < 40; j += 5)
      for (std::int64_t shift : {1, 7, 100}) {
        const double a = dot_rows(rotary(q, i), 0, rotary(k, j), 0);
        const double b = dot_rows(rotary(q, i + shift), 0, rotary(k, j + shift), 0);
        worst = std::max(worst, std::abs(a - b));
      }
  EXPECT_LT(worst, 1e-12);
  // And they do depend on it: no absolute trick.
  EXPECT_GT(std::abs(dot_rows(rotary(q, 0), 0, rotary(k, 1), 0) -
                     dot_rows(rotary(q, 0), 0, rotary(k, 5), 0)),
            1e-3);
}

TEST(Rotary, BatchDimensionsShareThePositions) {
  const Tensor x = random64({2, 3, 5, 4}, 4);
  const Tensor y = rotary(x, 2);
  for (std::int64_t b = 0; b < 6; ++b) {
    Tensor row = Tensor::empty({5, 4}, DType::f64);
    std::copy_n(x.data<double>() + b * 20, 20, row.data<double>());
    const Tensor expect = rotary(row, 2);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(y.data<double>()[b * 20 + i], expect.data<double>()[i]);
  }
}

TEST(Rotary, BadInputIsRefused) {
  EXPECT_THROW(rotary(random64({4, 5}, 5)), ShapeError);  // odd D
  EXPECT_THROW(rotary(random64({6}, 6)), ShapeError);  // no positions
  EXPECT_THROW(rotary(random64({4, 6}, 7), -1), ValueError);
  EXPECT_THROW(rotary(random64({4, 6}, 7), 0, 1.0), ValueError);
}

// The paper's sequence: 8 heads 1/2 .. 1/256; 6 heads those of 4, then every
// other of 8's (as the authors' code makes them).
TEST(Alibi, SlopesFollowThePapersSequence) {
  const std::vector<double> eight = alibi_slopes(8);
  ASSERT_EQ(eight.size(), 8u);
  for (int k = 0; k < 8; ++k)
    EXPECT_DOUBLE_EQ(eight[static_cast<std::size_t>(k)], std::exp2(-(k + 1)));
  const std::vector<double> six = alibi_slopes(6);
  const std::vector<double> expect = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  ASSERT_EQ(six.size(), expect.size());
  for (std::size_t k = 0; k < six.size(); ++k) EXPECT_DOUBLE_EQ(six[k], expect[k]) << k;
  EXPECT_EQ(alibi_slopes(1), std::vector<double>{std::exp2(-8.0)});
  EXPECT_THROW(alibi_slopes(0), ValueError);
}

// T5's mapping at its defaults (32 buckets, distance 128): exact near, then
// logarithmic, keys after the query in the upper half when bidirectional.
TEST(T5Buckets, MapOffsetsAsT5Does) {
  EXPECT_EQ(t5_bucket(0, true), 0);
  EXPECT_EQ(t5_bucket(-1, true), 1);
  EXPECT_EQ(t5_bucket(1, true), 17);
  EXPECT_EQ(t5_bucket(-7, true), 7);
  EXPECT_EQ(t5_bucket(-10, true), 8);  // 8 + floor(8 log(10/8) / log 16)
  EXPECT_EQ(t5_bucket(-20, true), 10);
  EXPECT_EQ(t5_bucket(-200, true), 15);
  EXPECT_EQ(t5_bucket(200, true), 31);
  // Causal: keys after the query all in bucket 0; 16 exact distances.
  EXPECT_EQ(t5_bucket(5, false), 0);
  EXPECT_EQ(t5_bucket(-15, false), 15);
  EXPECT_EQ(t5_bucket(-16, false), 16);
  EXPECT_EQ(t5_bucket(-1000, false), 31);
  // Monotone in the distance, inside [0, num_buckets).
  for (std::int64_t d = 1; d < 300; ++d) {
    EXPECT_LE(t5_bucket(-d, true), t5_bucket(-d - 1, true));
    EXPECT_LT(t5_bucket(-d, false), 32);
  }
}
