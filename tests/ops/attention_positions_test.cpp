// Relative positions and grouped heads in the attention kernels: the tiled
// forward and backward (the bias's gradient summed by distance), the decode
// kernel, against the materialized reference on odd shapes, on every
// instruction set and on tiles smaller than the lengths.
#include <cmath>
#include <string>
#include <vector>

#include "attn/core/threads.h"
#include "attn/ops/attention.h"
#include "attn/ops/positions.h"
#include "ops/attention_testing.h"
#include "testing.h"

using namespace attn;
using attn::testing::for_each_isa;
using attn::testing::KernelGuard;
using attn::testing::rel_diff;

namespace {

struct Case {
  bool four_d = true;
  std::int64_t B = 2, H = 3, Hk = 3, Q = 7, K = 7, D = 8, Dv = 8;
  bool causal = false, lens = false, starts = false;
  double p = 0.0;
  bool bias = true, rotary = false;
};

std::string describe(const Case& c) {
  return fmt::format(
      "{} B={} H={} Hk={} Q={} K={} D={} Dv={} causal={} lens={} starts={} p={} bias={} rotary={}",
      c.four_d ? "4-D" : "3-D", c.B, c.H, c.Hk, c.Q, c.K, c.D, c.Dv, c.causal, c.lens, c.starts,
      c.p, c.bias, c.rotary);
}

Shape shape_of(const Case& c, std::int64_t T, std::int64_t heads, std::int64_t d) {
  return c.four_d ? Shape{c.B, T, heads, d} : Shape{c.B * heads, T, d};
}

AttentionOptions options(const Case& c, const Tensor& bias, const Tensor& lens,
                         const Tensor& starts, Generator* gen) {
  AttentionOptions o;
  o.causal = c.causal;
  o.valid_lens = lens;
  if (c.bias) o.position_bias = bias;
  o.query_start = starts;
  o.rotary_queries = o.rotary_keys = c.rotary;
  o.dropout = c.p;
  o.generator = gen;
  return o;
}

// Fused against reference: the output and the gradients of q, k, v and the
// bias, within `tol`.
void expect_matches_reference(const Case& c, double tol = 2e-5) {
  SCOPED_TRACE(describe(c));
  Generator init(static_cast<std::uint64_t>(c.Q * 1000 + c.K * 10 + c.H));
  const std::int64_t rows = c.four_d ? c.B : c.B * c.H, bias_rows = c.four_d ? c.H : 1;
  Tensor q = uniform(-2, 2, shape_of(c, c.Q, c.H, c.D), init);
  Tensor k = uniform(-2, 2, shape_of(c, c.K, c.Hk, c.D), init);
  Tensor v = uniform(-1, 1, shape_of(c, c.K, c.Hk, c.Dv), init);
  Tensor bias = uniform(-2, 2, {bias_rows, 2 * c.K - 1}, init);
  Tensor g = uniform(-1, 1, shape_of(c, c.Q, c.H, c.Dv), init);
  Tensor lens = c.lens ? randint(0, c.K + 1, {rows}, init, DType::i64) : Tensor();
  Tensor starts = c.starts ? randint(0, c.K - c.Q + 1, {rows}, init, DType::i64) : Tensor();
  std::vector<Tensor> f{q.clone(), k.clone(), v.clone(), bias.clone()};
  std::vector<Tensor> r{q.clone(), k.clone(), v.clone(), bias.clone()};
  for (auto* set : {&f, &r})
    for (Tensor& t : *set) t.requires_grad_();
  Generator gf(5), gr(5);
  Tensor of = scaled_dot_product_attention(f[0], f[1], f[2], options(c, f[3], lens, starts, &gf));
  Tensor oref =
      scaled_dot_product_attention_reference(r[0], r[1], r[2], options(c, r[3], lens, starts, &gr));
  EXPECT_EQ(gf.offset(), gr.offset());
  ASSERT_EQ(of.shape(), oref.shape());
  EXPECT_FALSE(has_nonfinite(of));
  EXPECT_LT(rel_diff(of, oref), tol) << "forward";
  of.backward(g);
  oref.backward(g);
  const char* names[] = {"dq", "dk", "dv", "dbias"};
  for (int i = 0; i < (c.bias ? 4 : 3); ++i)
    EXPECT_LT(rel_diff(f[i].grad(), r[i].grad()), tol) << names[i];
}

struct ThreadGuard {
  explicit ThreadGuard(int n) : saved(get_num_threads()) { set_num_threads(n); }
  ~ThreadGuard() { set_num_threads(saved); }
  int saved;
};

}  // namespace

// Every instruction set, the default tiles and tiles much smaller than the
// lengths (the bias crossing tile edges, queries at their own positions,
// masks, dropout, grouped heads, both layouts).
TEST(AttentionPositions, BiasMatchesReferenceOnEveryIsaAndTile) {
  for_each_isa([] {
    for (auto [br, bc] : {std::pair<std::int64_t, std::int64_t>{0, 0}, {1, 5}, {16, 13}}) {
      KernelGuard tiles([=](AttentionKernelConfig& c) {
        c.tile_queries = br;
        c.tile_keys = bc;
      });
      SCOPED_TRACE(fmt::format("tiles {} x {}", br, bc));
      expect_matches_reference({.Q = 37, .K = 37, .D = 17, .Dv = 12, .causal = true});
      expect_matches_reference({.Q = 13, .K = 29, .lens = true, .starts = true, .p = 0.25});
      expect_matches_reference(
          {.B = 3, .H = 4, .Hk = 2, .Q = 20, .K = 20, .D = 16, .Dv = 9, .causal = true});
      expect_matches_reference({.four_d = false, .B = 2, .H = 2, .Hk = 2, .Q = 19, .K = 23});
      // Rotary inside the kernels, alone and with a bias.
      expect_matches_reference(
          {.Q = 37, .K = 37, .D = 18, .Dv = 12, .causal = true, .bias = false, .rotary = true});
      expect_matches_reference(
          {.Q = 13, .K = 29, .D = 16, .lens = true, .starts = true, .p = 0.25, .rotary = true});
      expect_matches_reference({.four_d = false,
                                .B = 2,
                                .H = 2,
                                .Hk = 2,
                                .Q = 19,
                                .K = 23,
                                .bias = false,
                                .rotary = true});
      expect_matches_reference(
          {.B = 3, .H = 4, .Hk = 2, .Q = 20, .K = 20, .D = 16, .Dv = 9, .rotary = true});
    }
  });
}

// d2l's Transformer's shape, which without a bias runs the small path.
TEST(AttentionPositions, BiasOnD2lShape) {
  expect_matches_reference({.B = 64, .H = 4, .Hk = 4, .Q = 10, .K = 10, .causal = true, .p = 0.1});
  expect_matches_reference({.B = 64, .H = 4, .Hk = 1, .Q = 10, .K = 10, .lens = true});
}

// One head's keys split over threads: the bias's gradient from every part,
// and rotary's dQ turned back per part.
TEST(AttentionPositions, FewHeadsSplitOverThreads) {
  ThreadGuard threads(4);
  for (bool rotary : {false, true})
    expect_matches_reference({.four_d = false,
                              .B = 1,
                              .H = 1,
                              .Hk = 1,
                              .Q = 150,
                              .K = 300,
                              .D = 64,
                              .Dv = 64,
                              .lens = true,
                              .starts = true,
                              .p = 0.1,
                              .rotary = rotary});
}

// Grouped heads without a bias: fused and reference agree, and they equal
// the keys and values repeated per query head.
TEST(AttentionPositions, GroupedHeadsAreRepeatedHeads) {
  for (std::int64_t Hk : {1, 2}) {
    Generator gen(3);
    Tensor q = uniform(-1, 1, {2, 9, 4, 8}, gen), k = uniform(-1, 1, {2, 11, Hk, 8}, gen),
           v = uniform(-1, 1, {2, 11, Hk, 8}, gen);
    AttentionOptions o;
    o.training = false;
    const Tensor grouped = scaled_dot_product_attention(q, k, v, o);
    const Tensor full_heads = scaled_dot_product_attention(q, repeat_interleave(k, 4 / Hk, 2),
                                                           repeat_interleave(v, 4 / Hk, 2), o);
    EXPECT_LT(max_abs_diff(grouped, full_heads), 1e-6);
    // One query: the decode kernel reads the shared heads in place.
    const Tensor q1 = q.narrow(1, 8, 1);
    EXPECT_LT(max_abs_diff(attention_decode(q1, k, v, o), scaled_dot_product_attention_reference(
                                                              q1, repeat_interleave(k, 4 / Hk, 2),
                                                              repeat_interleave(v, 4 / Hk, 2), o)),
              1e-6);
  }
}

// Rotary in the decode kernel: its queries turned inside, its keys turned
// before (a cache) or by the op (rotary_keys), against the reference.
TEST(AttentionPositions, DecodeTurnsQueries) {
  for_each_isa([] {
    Generator gen(13);
    const Tensor q = uniform(-2, 2, {3, 2, 4, 16}, gen), k = uniform(-2, 2, {3, 9, 2, 16}, gen),
                 v = uniform(-1, 1, {3, 9, 2, 16}, gen);
    AttentionOptions o;
    o.training = false;
    o.causal = true;
    o.rotary_queries = true;
    o.query_start = from_vector<std::int64_t>({7, 3, 0});
    AttentionOptions both = o;
    both.rotary_keys = true;
    const Tensor expect = scaled_dot_product_attention_reference(q, k, v, both);
    EXPECT_LT(rel_diff(attention_decode(q, k, v, both), expect), 2e-6);
    EXPECT_LT(rel_diff(attention_decode(q, rotary_heads(k, Tensor()), v, o), expect), 2e-6);
  });
}

// Decoding token by token against a growing cache gives the rows of the
// full causal forward: ALiBi and grouped heads, every instruction set.
TEST(AttentionPositions, DecodeRowEqualsFullForwardRow) {
  for_each_isa([] {
    const std::int64_t B = 3, T = 12, H = 4, Hk = 2, D = 16;
    Generator gen(11);
    Tensor q = uniform(-2, 2, {B, T, H, D}, gen), k = uniform(-2, 2, {B, T, Hk, D}, gen),
           v = uniform(-1, 1, {B, T, Hk, D}, gen);
    AttentionOptions full;
    full.causal = true;
    full.training = false;
    full.position_bias = alibi_bias(H, T);
    const Tensor all = scaled_dot_product_attention(q, k, v, full);
    for (std::int64_t t = 0; t < T; ++t) {
      AttentionOptions step;
      step.causal = true;
      step.training = false;
      step.position_bias = alibi_bias(H, t + 1);
      const Tensor row =
          attention_decode(q.narrow(1, t, 1), k.narrow(1, 0, t + 1), v.narrow(1, 0, t + 1), step);
      EXPECT_LT(rel_diff(row, all.narrow(1, t, 1)), 2e-6) << "token " << t;
    }
  });
}

// alibi_bias_kept: alibi_bias's values as a view of a kept table, whose
// rows lie further apart than 2K - 1; the kernels read it in place and give
// the bits of the packed bias, tiled forward and decode, every instruction set.
TEST(AttentionPositions, KeptAlibiViewIsReadInPlace) {
  const std::int64_t H = 3, D = 8;
  ASSERT_EQ(to_vector<float>(alibi_bias_kept(H, 200)), to_vector<float>(alibi_bias(H, 200)));
  for (std::int64_t K : {1, 5, 13, 70}) {
    const Tensor kept = alibi_bias_kept(H, K);
    EXPECT_EQ(to_vector<float>(kept), to_vector<float>(alibi_bias(H, K))) << K;
    if (K > 1) {
      EXPECT_GT(kept.stride(0), 2 * K - 1) << K;  // a view of the kept table
    }
  }
  for_each_isa([&] {
    for (std::int64_t K : {13, 70}) {
      Generator gen(5);
      Tensor q = uniform(-2, 2, {2, K, H, D}, gen), k = uniform(-2, 2, {2, K, H, D}, gen),
             v = uniform(-1, 1, {2, K, H, D}, gen);
      AttentionOptions packed, view;
      packed.causal = view.causal = true;
      packed.training = view.training = false;
      packed.position_bias = alibi_bias(H, K);
      view.position_bias = alibi_bias_kept(H, K);
      EXPECT_EQ(to_vector<float>(scaled_dot_product_attention(q, k, v, view)),
                to_vector<float>(scaled_dot_product_attention(q, k, v, packed)))
          << "forward, K " << K;
      const Tensor q1 = q.narrow(1, K - 1, 1);
      EXPECT_EQ(to_vector<float>(attention_decode(q1, k, v, view)),
                to_vector<float>(attention_decode(q1, k, v, packed)))
          << "decode, K " << K;
    }
  });
}

TEST(AttentionPositions, AlibiAndT5Biases) {
  // ALiBi: -slope |distance|, entry i at distance i - (K - 1).
  const Tensor a = alibi_bias(2, 3, DType::f64);
  ASSERT_EQ(a.shape(), (Shape{2, 5}));
  EXPECT_EQ(to_vector<double>(a),
            (std::vector<double>{-0.125, -0.0625, 0, -0.0625, -0.125, -2.0 / 256, -1.0 / 256, 0,
                                 -1.0 / 256, -2.0 / 256}));  // slopes 2^-4, 2^-8
  // T5: the table read at each distance's bucket; its gradient adds by bucket.
  Tensor table = arange(0, 8, 1, DType::f64).reshape({1, 8});
  table.requires_grad_();
  const Tensor b = t5_bias(table, 3, /*bidirectional=*/true, 16);
  std::vector<double> expect;
  for (std::int64_t i = 0; i < 5; ++i)
    expect.push_back(static_cast<double>(t5_bucket(2 - i, true, 8, 16)));
  EXPECT_EQ(to_vector<double>(b), expect);
  b.backward(ones({1, 5}, DType::f64));
  double total = 0;
  for (double x : to_vector<double>(table.grad())) total += x;
  EXPECT_EQ(total, 5.0);
}

TEST(AttentionPositions, BadInputs) {
  Tensor q = ones({2, 3, 4, 8}), k = ones({2, 5, 4, 8});
  auto message = [&](const AttentionOptions& o, const Tensor& kk) {
    try {
      scaled_dot_product_attention(q, kk, kk, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  AttentionOptions o;
  o.position_bias = ones({4, 8});
  EXPECT_EQ(message(o, k),
            "scaled_dot_product_attention: position_bias must have shape [4, 9] (heads, 2 x "
            "keys - 1), got [4, 8]");
  o.position_bias = ones({4, 9}, DType::f64);
  EXPECT_EQ(message(o, k),
            "scaled_dot_product_attention: position_bias must be f32 like the queries, got f64");
  o.position_bias = ones({4, 9});
  o.query_start = from_vector<std::int64_t>({0, 3});
  EXPECT_EQ(message(o, k),
            "scaled_dot_product_attention: query_start[1] = 3 puts its 3 queries outside the 5 "
            "key positions");
  o.query_start = from_vector<std::int64_t>({0});
  EXPECT_THROW(scaled_dot_product_attention(q, k, k, o), ShapeError);
  AttentionOptions none;
  EXPECT_NE(message(none, ones({2, 5, 3, 8})).find("a divisor of the queries'"), std::string::npos);
  // A bias with more queries than keys needs their positions.
  AttentionOptions more;
  more.position_bias = ones({4, 3});
  Tensor k2 = ones({2, 2, 4, 8});
  EXPECT_EQ(message(more, k2),
            "scaled_dot_product_attention: a position bias with 3 queries after 2 keys needs "
            "query_start");
}
