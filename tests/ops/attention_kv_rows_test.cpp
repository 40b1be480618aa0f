// AttentionOptions::kv_rows: query row b attends row kv_rows[b] of the keys
// and values. Every path (the decode kernel reading the rows in place, the
// small and tiled kernels and the materialized path on gathered rows) must
// equal the reference run on k and v gathered with index_select.
#include <string>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/ops/attention.h"
#include "attn/ops/index.h"
#include "ops/attention_testing.h"
#include "testing.h"

using namespace attn;
using attn::testing::for_each_isa;
using attn::testing::leaf64;
using attn::testing::rel_diff;

namespace {

using Inputs = std::vector<Tensor>;

Tensor random32(const Shape& shape, std::uint64_t seed) {
  Generator gen(seed);
  return uniform(-2.0, 2.0, shape, gen, DType::f32);
}

Tensor ids(const std::vector<std::int64_t>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())});
}

// The reference: k and v gathered, no kv_rows.
Tensor gathered_reference(const Tensor& q, const Tensor& k, const Tensor& v, AttentionOptions o) {
  Tensor rows = o.kv_rows;
  o.kv_rows = Tensor();
  return scaled_dot_product_attention_reference(q, index_select(k, 0, rows),
                                                index_select(v, 0, rows), o);
}

}  // namespace

// Decode-sized problems without gradients (the decode kernel): odd sizes,
// rows repeated and skipped, fewer and more key rows than query rows, valid
// lengths per query row, causal, and a long cache split over keys
// (flash-decoding: few heads, thousands of keys). Tolerance: f32 rounding,
// 2e-6 relative to the largest output.
TEST(AttentionKvRows, DecodeKernelEqualsGatheredReference) {
  autograd::NoGradGuard no_grad;
  struct Case {
    std::int64_t Bk, Q, K, H, D, Dv;
    std::vector<std::int64_t> rows;
    bool causal;
  };
  const std::vector<Case> cases = {
      {3, 1, 7, 3, 5, 7, {2, 2, 0, 1, 2}, false},
      {2, 1, 1, 1, 3, 3, {1, 0, 1}, false},
      {6, 3, 13, 2, 9, 4, {5, 0}, true},
      {2, 1, 2300, 1, 16, 16, {1, 1, 0}, false},
  };
  for_each_isa([&] {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      SCOPED_TRACE(i);
      const std::int64_t B = static_cast<std::int64_t>(c.rows.size());
      Tensor q = random32({B, c.Q, c.H, c.D}, 10 + i);
      Tensor k = random32({c.Bk, c.K, c.H, c.D}, 20 + i);
      Tensor v = random32({c.Bk, c.K, c.H, c.Dv}, 30 + i);
      AttentionOptions o;
      o.training = false;
      o.causal = c.causal;
      o.kv_rows = ids(c.rows);
      std::vector<std::int64_t> lens;
      for (std::int64_t b = 0; b < B; ++b) lens.push_back((b * 5 + 3) % (c.K + 1));
      o.valid_lens = ids(lens);
      Tensor want = gathered_reference(q, k, v, o);
      EXPECT_LT(rel_diff(scaled_dot_product_attention(q, k, v, o), want), 2e-6);
      EXPECT_LT(rel_diff(attention_decode(q, k, v, o), want), 2e-6);
      // A view of a larger cache buffer, as a decoder's cache is.
      Tensor kbuf = random32({c.Bk, c.K + 5, c.H, c.D}, 40 + i);
      Tensor vbuf = random32({c.Bk, c.K + 5, c.H, c.Dv}, 50 + i);
      copy_(kbuf.narrow(1, 0, c.K), k);
      copy_(vbuf.narrow(1, 0, c.K), v);
      EXPECT_LT(
          rel_diff(attention_decode(q, kbuf.narrow(1, 0, c.K), vbuf.narrow(1, 0, c.K), o), want),
          2e-6);
    }
  });
}

// Paths other than decode (gradients, many queries, dropout): the rows are
// gathered, differentiably. f64 gradcheck through kv_rows, and the forward
// of the small and tiled kernels against the reference.
TEST(AttentionKvRows, OtherPathsGatherAndDifferentiate) {
  Tensor q = leaf64({4, 5, 2, 3}, 1, -2, 2), k = leaf64({3, 7, 2, 3}, 2, -2, 2),
         v = leaf64({3, 7, 2, 4}, 3);
  const Tensor rows = ids({2, 0, 2, 1});
  const Tensor lens = ids({7, 3, 0, 5});
  EXPECT_GRADCHECK(
      [rows, lens](const Inputs& x) {
        AttentionOptions o;
        o.valid_lens = lens;
        o.kv_rows = rows;
        return scaled_dot_product_attention(x[0], x[1], x[2], o);
      },
      (Inputs{q, k, v}));
  for_each_isa([&] {
    for (std::int64_t Q : {12, 70}) {  // small path, then tiled
      SCOPED_TRACE(Q);
      Tensor q32 = random32({4, Q, 3, 8}, 5), k32 = random32({2, 65, 3, 8}, 6),
             v32 = random32({2, 65, 3, 5}, 7);
      AttentionOptions o;
      o.causal = true;
      o.kv_rows = ids({1, 1, 0, 1});
      q32.requires_grad_();
      Tensor out = scaled_dot_product_attention(q32, k32, v32, o);
      EXPECT_LT(rel_diff(out, gathered_reference(q32.detach(), k32, v32, o)), 2e-6);
    }
  });
  // The materialized path (attention weights kept) gathers too.
  AttentionOptions o;
  o.kv_rows = rows;
  o.valid_lens = lens;
  MaterializedAttention m = scaled_dot_product_attention_materialized(q, k, v, o);
  EXPECT_LT(rel_diff(m.output, gathered_reference(q, k, v, o)), 1e-12);
  EXPECT_EQ(m.weights.shape(), (Shape{8, 5, 7}));
}

TEST(AttentionKvRows, BadRowsAreClearErrors) {
  Tensor q = random32({3, 1, 2, 4}, 1), k = random32({2, 5, 2, 4}, 2),
         v = random32({2, 5, 2, 4}, 3);
  auto error_of = [&](const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& rows) {
    AttentionOptions o;
    o.training = false;
    o.kv_rows = rows;
    try {
      scaled_dot_product_attention(q_, k_, v_, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(q, k, v, ids({0, 1, 2})),
            "scaled_dot_product_attention: kv_rows[2] = 2 is outside [0, 2) (the rows of the "
            "keys and values)");
  EXPECT_EQ(error_of(q, k, v, ids({0, -1, 1})),
            "scaled_dot_product_attention: kv_rows[1] = -1 is outside [0, 2) (the rows of the "
            "keys and values)");
  EXPECT_EQ(error_of(q, k, v, ids({0, 1})),
            "scaled_dot_product_attention: kv_rows must be integers of shape [3] (one per batch "
            "row), got i64 [2]");
  EXPECT_EQ(error_of(q, k, v, zeros({3}, DType::f32)),
            "scaled_dot_product_attention: kv_rows must be integers of shape [3] (one per batch "
            "row), got f32 [3]");
  Tensor q3 = random32({3, 1, 4}, 4), k3 = random32({2, 5, 4}, 5);
  EXPECT_EQ(error_of(q3, k3, k3, ids({0, 1, 1})),
            "scaled_dot_product_attention: kv_rows needs the 4-D layout (B, T, H, D); the "
            "operands are 3-D");
  // Keys and values must still agree with each other.
  EXPECT_NE(error_of(q, k, random32({3, 5, 2, 4}, 6), ids({0, 1, 1})).find("batch"),
            std::string::npos);
}
