// The attention op's seams: the one valid-lengths rule (attention_limits)
// and the materialized path that returns the weights.
#include <cmath>
#include <string>
#include <vector>

#include "attn/ops/attention.h"
#include "ops/attention_testing.h"
#include "testing.h"

using namespace attn;
using attn::testing::max_abs_diff;
using attn::testing::rel_diff;

namespace {

std::vector<std::int64_t> limits_of(const Tensor& valid_lens, bool causal, std::int64_t B,
                                    std::int64_t Q, std::int64_t K) {
  Tensor l = attention_limits(valid_lens, causal, B, Q, K);
  EXPECT_EQ(l.shape(), (Shape{B, Q}));
  EXPECT_EQ(l.dtype(), DType::i64);
  return to_vector<std::int64_t>(l);
}

}  // namespace

TEST(AttentionLimits, ValidLensPerRowAndPerQuery) {
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(limits_of(Tensor(), false, 2, 3, 5), (V{5, 5, 5, 5, 5, 5}));
  EXPECT_EQ(limits_of(from_vector<std::int64_t>({2, 0}), false, 2, 3, 5), (V{2, 2, 2, 0, 0, 0}));
  EXPECT_EQ(limits_of(from_vector<std::int32_t>({1, 2, 3, 4, 5, 0}, {2, 3}), false, 2, 3, 5),
            (V{1, 2, 3, 4, 5, 0}));
  // A fractional length l means k < ceil(l).
  EXPECT_EQ(limits_of(from_vector<float>({2.5f, 0.25f}), false, 2, 1, 5), (V{3, 1}));
}

// Causal is d2l's dec_valid_lens = 1..T when Q == K; with Q < K (new queries
// after a prefix) query q sees K - Q + q + 1 keys; with valid_lens, the minimum.
TEST(AttentionLimits, CausalIsDecValidLens) {
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(limits_of(Tensor(), true, 2, 4, 4), (V{1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(limits_of(Tensor(), true, 1, 2, 5), (V{4, 5}));
  EXPECT_EQ(limits_of(Tensor(), true, 1, 4, 2), (V{0, 0, 1, 2}));  // Q > K: clamped at 0
  EXPECT_EQ(limits_of(from_vector<std::int64_t>({2, 4}), true, 2, 4, 4),
            (V{1, 2, 2, 2, 1, 2, 3, 4}));
  EXPECT_EQ(limits_of(from_vector<double>({3, 0, 1, 4}, {1, 4}), true, 1, 4, 4), (V{1, 0, 1, 4}));
}

TEST(AttentionLimits, BadValidLensNameTheOpAndTheValue) {
  auto message = [](const Tensor& vl, std::int64_t B, std::int64_t Q, std::int64_t K) {
    try {
      attention_limits(vl, false, B, Q, K, "my_op");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(from_vector<std::int64_t>({1, 6}), 2, 3, 5),
            "my_op: valid length 6 is outside [0, 5] (the number of keys)");
  EXPECT_EQ(message(from_vector<float>({-1.0f, 2.0f}), 2, 3, 5),
            "my_op: valid length -1 is outside [0, 5] (the number of keys)");
  EXPECT_EQ(message(from_vector<float>({5.5f, 2.0f}), 2, 3, 5),
            "my_op: valid length 5.5 is outside [0, 5] (the number of keys)");
  EXPECT_EQ(message(from_vector<float>({NAN, 2.0f}), 2, 3, 5),
            "my_op: valid length nan is not finite");
  EXPECT_EQ(message(zeros({2, 4}, DType::i64), 2, 3, 5),
            "my_op: valid_lens must have shape [2] or [2, 3] (per batch row, or per batch row and "
            "query), got [2, 4]");
  EXPECT_THROW(attention_limits(zeros({3}, DType::i64), false, 2, 3, 5), ShapeError);
  EXPECT_THROW(attention_limits(from_vector<std::int64_t>({1, 6}), true, 2, 3, 5), ValueError);
}

// ---- the materialized path ----

// It returns d2l's weights (before dropout, one row per head and query) along
// with the output; the reference is its output.
TEST(AttentionMaterialized, ReturnsTheWeights) {
  Generator gen(22);
  Tensor q = uniform(-2, 2, {2, 3, 2, 4}, gen), k = uniform(-2, 2, {2, 5, 2, 4}, gen);
  Tensor v = uniform(-1, 1, {2, 5, 2, 3}, gen);
  AttentionOptions o;
  o.valid_lens = from_vector<std::int64_t>({4, 0});
  o.causal = true;
  MaterializedAttention m = scaled_dot_product_attention_materialized(q, k, v, o);
  ASSERT_EQ(m.weights.shape(), (Shape{4, 3, 5}));  // (B * H, Q, K)
  const std::int64_t limit[2][3] = {{3, 4, 4}, {0, 0, 0}};  // min(valid_lens, q + 1 + K - Q)
  for (std::int64_t n = 0; n < 4; ++n)
    for (std::int64_t i = 0; i < 3; ++i) {
      const std::int64_t L = limit[n / 2][i];
      double total = 0;
      for (std::int64_t c = 0; c < 5; ++c) {
        const double w = m.weights.at({n, i, c});
        total += w;
        if (L == 0)
          EXPECT_NEAR(w, 0.2, 1e-6);
        else if (c >= L)
          EXPECT_EQ(w, 0.0);
        else
          EXPECT_GT(w, 0.0);
      }
      EXPECT_NEAR(total, 1.0, 1e-6);
    }
  EXPECT_EQ(max_abs_diff(m.output, scaled_dot_product_attention_reference(q, k, v, o)), 0.0);
  EXPECT_LT(rel_diff(m.output, scaled_dot_product_attention(q, k, v, o)), 1e-5);
}
