// tests/ops/attention_transpose_checks.h — the checks of the attention
// kernels' lane transposes (src/ops/attention_transpose.h) for a vector type
// V with interleave / deinterleave in registers, against plain element
// loops: every count of columns and lanes, the same bits, nothing written
// outside the block. Included after the target pragma of V's instruction
// set, and after attention_common.h, attention_transpose.h and V's header,
// by attention_transpose_test.cpp (AVX-512) and
// attention_transpose_avx2_test.cpp (AVX2).
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

}  // namespace
}  // namespace attn::detail
