// tests/kernels/attention_transpose_checks.h — the checks of the attention
// kernels' lane transposes (src/kernels/attention/attention_transpose.h) for a vector type
// V with interleave / deinterleave in registers, against plain element
// loops: every count of columns and lanes, the same bits, nothing written
// outside the block. Included after the target pragma of V's instruction
// set, and after attention_common.h, attention_transpose.h and V's header,
// by attention_transpose_test.cpp (AVX-512) and
// attention_transpose_avx2_test.cpp (AVX2). Also the checks of V's exp and
// its lock-step forms (ExpInputs, exp_checks below).
#pragma once

namespace attn::detail {
namespace {

constexpr float kSentinel = -12345.0f;

std::vector<float> random_floats(std::size_t n, std::mt19937& gen) {
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> x(n);
  for (float& v : x) v = u(gen);
  return x;
}

template <class V>
void interleave_equals_element_loop() {
  constexpr int W = V::W;
  static_assert(LaneTranspose<V>::kInRegisters);
  std::mt19937 gen(3);
  for (float scale : {1.0f, 0.3535f})
    for (int n = 1; n <= W; ++n) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " scale " << scale);
      // W rows of n values at scattered places in one buffer.
      const std::vector<float> buf = random_floats(W * 40, gen);
      const float* src[W];
      for (int l = 0; l < W; ++l) src[l] = buf.data() + ((l * 7) % W) * 40 + l % 3;
      std::vector<float> got(W * (W + 1), kSentinel);
      V::interleave(src, n, scale, got.data());
      for (int j = 0; j < W + 1; ++j)
        for (int l = 0; l < W; ++l) {
          const float want = j < n ? src[l][j] * scale : kSentinel;
          ASSERT_EQ(got[j * W + l], want) << "column " << j << " lane " << l;
        }
    }
}

template <class V>
void deinterleave_equals_element_loop() {
  constexpr int W = V::W;
  std::mt19937 gen(4);
  for (float scale : {1.0f, 0.25f, 1.7f})
    for (int n = 1; n <= W; ++n)
      for (int lanes = 1; lanes <= W; ++lanes) {
        SCOPED_TRACE(::testing::Message() << "n " << n << " lanes " << lanes);
        const std::vector<float> src = random_floats(W * W, gen);
        std::vector<float> out(W * 20, kSentinel);
        float* dst[W];
        for (int l = 0; l < W; ++l) dst[l] = out.data() + ((l * 5) % W) * 20 + 1;
        V::deinterleave(src.data(), n, scale, dst, lanes);
        for (int l = 0; l < W; ++l)
          for (int j = -1; j < 19; ++j) {
            const float want = l < lanes && j >= 0 && j < n ? src[j * W + l] * scale : kSentinel;
            ASSERT_EQ(dst[l][j], want) << "lane " << l << " column " << j;
          }
      }
}

// The block loops around them: rows of any length (null rows read as
// zeros), a leading dimension other than W, each lane its own scale.
template <class V>
void rows_to_lanes_and_back() {
  constexpr int W = V::W;
  using Lanes = LaneTranspose<V>;
  std::mt19937 gen(5);
  for (std::int64_t d : {1, 5, 8, 9, 16, 24, 37, 64})
    for (std::int64_t ld : {W, 3 * W}) {
      SCOPED_TRACE(::testing::Message() << "d " << d << " ld " << ld);
      const std::vector<float> buf = random_floats(static_cast<std::size_t>(W * d), gen);
      const float* src[W];
      for (int l = 0; l < W; ++l) src[l] = l == 6 ? nullptr : buf.data() + l * d;
      std::vector<float> lanes(static_cast<std::size_t>(d * ld), kSentinel);
      Lanes::rows_to_lanes(src, d, 0.5f, lanes.data(), ld);
      for (std::int64_t c = 0; c < d; ++c)
        for (std::int64_t l = 0; l < ld; ++l) {
          const float want = l >= W ? kSentinel : src[l] ? src[l][c] * 0.5f : 0.0f;
          ASSERT_EQ(lanes[static_cast<std::size_t>(c * ld + l)], want) << c << " " << l;
        }
      float scale[W];
      for (int l = 0; l < W; ++l) scale[l] = 1.0f / static_cast<float>(l + 1);
      for (int count : {W, W - 5}) {
        std::vector<float> rows(static_cast<std::size_t>(W * (d + 1)), kSentinel);
        float* dst[W];
        for (int l = 0; l < W; ++l) dst[l] = rows.data() + l * (d + 1);
        Lanes::lanes_to_rows(lanes.data(), ld, d, scale, dst, count);
        for (int l = 0; l < W; ++l)
          for (std::int64_t c = 0; c <= d; ++c) {
            const float want = l < count && c < d
                                   ? lanes[static_cast<std::size_t>(c * ld + l)] * scale[l]
                                   : kSentinel;
            ASSERT_EQ(dst[l][c], want) << "lane " << l << " column " << c;
          }
      }
    }
}

// The inputs of the exp checks: [-86.9, 88.7] in steps of 0.0137, [-86.9,
// -86.5] in steps of 1e-4 and a few special values (the first `normal`
// ones), then values below -86.9 and -inf in every lane position next to
// normal ones, NaN, -NaN and 100 (above 88.72), padded with 1 to a multiple
// of 64 (whole registers for any N up to 4 on 16 lanes).
struct ExpInputs {
  std::vector<float> xs;
  std::size_t normal = 0;
  ExpInputs() {
    for (float x = -86.9f; x < 88.7f; x += 0.0137f) xs.push_back(x);
    for (float x = -86.9f; x < -86.5f; x += 1e-4f) xs.push_back(x);
    for (float x : {0.0f, -0.0f, 1e-8f, -1e-8f, 88.72f}) xs.push_back(x);
    normal = xs.size();
    const float below[] = {-86.95f, -87.0f, -100.0f, -1e6f,
                           -std::numeric_limits<float>::infinity()};
    for (std::size_t i = 0; i < 40; ++i) {
      xs.push_back(below[i % 5]);
      xs.push_back(static_cast<float>(i) * -0.5f);
    }
    xs.push_back(std::numeric_limits<float>::quiet_NaN());
    xs.push_back(-std::numeric_limits<float>::quiet_NaN());
    xs.push_back(100.0f);
    while (xs.size() % 64 != 0) xs.push_back(1.0f);
  }
};

// f(r) on xs, N registers of V at a time (r: N registers, in place).
template <class V, int N, class F>
std::vector<float> map_registers(const std::vector<float>& xs, F f) {
  std::vector<float> out(xs.size());
  for (std::size_t i = 0; i < xs.size(); i += V::W * N) {
    typename V::R r[N];
    for (int j = 0; j < N; ++j) r[j] = V::load(xs.data() + i + V::W * j);
    f(r);
    for (int j = 0; j < N; ++j) V::store(out.data() + i + V::W * j, r[j]);
  }
  return out;
}

// Lane for lane the same bits (both NaN where x is NaN).
inline void expect_same_bits(const std::vector<float>& xs, const std::vector<float>& got,
                             const std::vector<float>& want) {
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (std::isnan(xs[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
          << xs[i] << " at " << i;
    }
  }
}

// V::exp: within 3e-7 relative of std::exp from -86.9 (where a p 2^(n-1)
// would be subnormal) to 88.72; 0 below -86.9 and for -inf (masked scores),
// however their lanes mix with normal ones; NaN stays NaN; above 88.72
// `above` (what V gives there: inf, or what 88.72 gives). Its lock-step form
// exp_n, 2 and 4 registers at a time, gives the same bits.
template <class V>
void exp_checks(float above) {
  const ExpInputs in;
  const std::vector<float>& xs = in.xs;
  const std::vector<float> got =
      map_registers<V, 1>(xs, [](typename V::R* r) { r[0] = V::exp(r[0]); });
  expect_same_bits(xs, map_registers<V, 4>(xs, [](typename V::R* r) { V::template exp_n<4>(r); }),
                   got);
  expect_same_bits(xs, map_registers<V, 2>(xs, [](typename V::R* r) { V::template exp_n<2>(r); }),
                   got);
  float worst = 0;
  for (std::size_t i = 0; i < in.normal; ++i)
    worst = std::max(worst, std::fabs(got[i] - std::exp(xs[i])) / std::exp(xs[i]));
  EXPECT_LT(worst, 3e-7f);
  for (std::size_t i = in.normal; i < xs.size(); ++i) {
    if (std::isnan(xs[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else if (xs[i] < -86.9f) {
      EXPECT_EQ(got[i], 0.0f) << xs[i] << " at " << i;
    } else if (xs[i] > 88.72f) {
      EXPECT_EQ(got[i], above) << xs[i] << " at " << i;
    } else {
      EXPECT_NEAR(got[i], std::exp(xs[i]), 3e-7f * std::exp(xs[i])) << xs[i] << " at " << i;
    }
  }
}

// V::softmax_exp_n, the tiled forward's exp of other bits: within 3e-7 +
// 8e-8 |x| relative of std::exp on [-86.9, hi], 0 below -86.9 and for -inf,
// NaN stays NaN; one and four registers at a time the same. Above hi (never
// a softmax's x - max, which is at most 0) it is not checked.
template <class V>
void softmax_exp_checks(float hi) {
  const ExpInputs in;
  const std::vector<float>& xs = in.xs;
  const auto one =
      map_registers<V, 1>(xs, [](typename V::R* r) { V::template softmax_exp_n<1>(r); });
  const auto four =
      map_registers<V, 4>(xs, [](typename V::R* r) { V::template softmax_exp_n<4>(r); });
  expect_same_bits(xs, four, one);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const float x = xs[i];
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(one[i])) << "at " << i;
    } else if (x < -86.9f) {
      EXPECT_EQ(one[i], 0.0f) << x << " at " << i;
    } else if (x <= hi) {
      const double want = std::exp(static_cast<double>(x));
      EXPECT_LE(std::fabs(one[i] - want) / want, 3e-7 + 8e-8 * std::fabs(x)) << x << " at " << i;
    }
  }
}

}  // namespace
}  // namespace attn::detail
