// AttentionOptions::kv_rows: query row b attends row kv_rows[b] of the keys
// and values, or (a table (B, K)) its key c is key c of row kv_rows[b, c].
// Every path (the decode kernel reading the rows in place, the
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

// t (Bk, K, H, d) gathered by a table (B, K), key by key, plainly.
Tensor gather_by_table(const Tensor& t, const Tensor& table) {
  const std::int64_t B = table.size(0), K = table.size(1);
  std::vector<Tensor> rows;
  for (std::int64_t b = 0; b < B; ++b) {
    std::vector<Tensor> keys;
    for (std::int64_t c = 0; c < K; ++c)
      keys.push_back(t.narrow(0, table.data<std::int64_t>()[b * K + c], 1).narrow(1, c, 1));
    rows.push_back(cat(keys, 1));
  }
  return cat(rows, 0);
}

// The reference: k and v gathered, no kv_rows.
Tensor gathered_reference(const Tensor& q, const Tensor& k, const Tensor& v, AttentionOptions o) {
  Tensor rows = o.kv_rows;
  o.kv_rows = Tensor();
  if (rows.dim() == 2)
    return scaled_dot_product_attention_reference(q, gather_by_table(k, rows),
                                                  gather_by_table(v, rows), o);
  return scaled_dot_product_attention_reference(q, index_select(k, 0, rows),
                                                index_select(v, 0, rows), o);
}

// A random table (B, K) of rows in [0, Bk).
Tensor random_table(std::int64_t B, std::int64_t K, std::int64_t Bk, std::uint64_t seed) {
  Generator gen(seed);
  return randint(0, Bk, {B, K}, gen);
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

// A table per key (beam search's shared prefixes): the decode kernel reads
// each key from its row in place. Odd sizes, causal and valid lengths, a
// view of a larger buffer, a long cache split over keys. Tolerance as above.
TEST(AttentionKvRows, DecodeKernelReadsATableOfRowsPerKey) {
  autograd::NoGradGuard no_grad;
  struct Case {
    std::int64_t B, Bk, Q, K, H, D, Dv;
    bool causal;
  };
  const std::vector<Case> cases = {
      {5, 3, 1, 7, 3, 5, 7, false},      {3, 2, 1, 1, 1, 3, 3, false},
      {2, 6, 3, 13, 2, 9, 4, true},      {4, 9, 1, 33, 4, 64, 64, true},
      {3, 2, 1, 2300, 1, 16, 16, false},
  };
  for_each_isa([&] {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      SCOPED_TRACE(i);
      Tensor q = random32({c.B, c.Q, c.H, c.D}, 10 + i);
      Tensor kbuf = random32({c.Bk, c.K + 3, c.H, c.D}, 20 + i);
      Tensor vbuf = random32({c.Bk, c.K + 3, c.H, c.Dv}, 30 + i);
      Tensor k = kbuf.narrow(1, 0, c.K), v = vbuf.narrow(1, 0, c.K);
      AttentionOptions o;
      o.training = false;
      o.causal = c.causal;
      o.kv_rows = random_table(c.B, c.K, c.Bk, 40 + i);
      std::vector<std::int64_t> lens;
      for (std::int64_t b = 0; b < c.B; ++b) lens.push_back((b * 5 + 3) % (c.K + 1));
      o.valid_lens = ids(lens);
      Tensor want = gathered_reference(q, k.contiguous(), v.contiguous(), o);
      EXPECT_LT(rel_diff(scaled_dot_product_attention(q, k, v, o), want), 2e-6);
      EXPECT_LT(rel_diff(attention_decode(q, k, v, o), want), 2e-6);
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
  // A row per query row, then a table per key (gradients flow to the keys
  // and values each row read).
  const Tensor table = random_table(4, 7, 3, 8);
  for (const Tensor& r : {rows, table}) {
    EXPECT_GRADCHECK(
        [r, lens](const Inputs& x) {
          AttentionOptions o;
          o.valid_lens = lens;
          o.kv_rows = r;
          return scaled_dot_product_attention(x[0], x[1], x[2], o);
        },
        (Inputs{q, k, v}));
  }
  struct Fused {
    std::int64_t B, Bk;
    Tensor rows;  // (B) or (B, 65)
  };
  const std::vector<Fused> fused = {{4, 2, ids({1, 1, 0, 1})}, {3, 4, random_table(3, 65, 4, 12)}};
  for_each_isa([&] {
    for (const Fused& f : fused)
      for (std::int64_t Q : {12, 70}) {  // small path, then tiled
        SCOPED_TRACE(Q);
        Tensor q32 = random32({f.B, Q, 3, 8}, 5), k32 = random32({f.Bk, 65, 3, 8}, 6),
               v32 = random32({f.Bk, 65, 3, 5}, 7);
        AttentionOptions o;
        o.causal = true;
        o.kv_rows = f.rows;
        q32.requires_grad_();
        Tensor out = scaled_dot_product_attention(q32, k32, v32, o);
        EXPECT_LT(rel_diff(out, gathered_reference(q32.detach(), k32, v32, o)), 2e-6);
      }
  });
  // The materialized path (attention weights kept) gathers too.
  for (const Tensor& r : {rows, table}) {
    AttentionOptions o;
    o.kv_rows = r;
    o.valid_lens = lens;
    MaterializedAttention m = scaled_dot_product_attention_materialized(q, k, v, o);
    EXPECT_LT(rel_diff(m.output, gathered_reference(q, k, v, o)), 1e-12);
    EXPECT_EQ(m.weights.shape(), (Shape{8, 5, 7}));
  }
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
            "row) or [3, 5] (one per batch row and key), got i64 [2]");
  EXPECT_EQ(error_of(q, k, v, zeros({3}, DType::f32)),
            "scaled_dot_product_attention: kv_rows must be integers of shape [3] (one per batch "
            "row) or [3, 5] (one per batch row and key), got f32 [3]");
  EXPECT_EQ(error_of(q, k, v, zeros({3, 4}, DType::i64)),
            "scaled_dot_product_attention: kv_rows must be integers of shape [3] (one per batch "
            "row) or [3, 5] (one per batch row and key), got i64 [3, 4]");
  Tensor table = zeros({3, 5}, DType::i64);
  table.data<std::int64_t>()[7] = 2;
  EXPECT_EQ(error_of(q, k, v, table),
            "scaled_dot_product_attention: kv_rows[1, 2] = 2 is outside [0, 2) (the rows of the "
            "keys and values)");
  Tensor q3 = random32({3, 1, 4}, 4), k3 = random32({2, 5, 4}, 5);
  EXPECT_EQ(error_of(q3, k3, k3, ids({0, 1, 1})),
            "scaled_dot_product_attention: kv_rows needs the 4-D layout (B, T, H, D); the "
            "operands are 3-D");
  // Keys and values must still agree with each other.
  EXPECT_NE(error_of(q, k, random32({3, 5, 2, 4}, 6), ids({0, 1, 1})).find("batch"),
            std::string::npos);
}
