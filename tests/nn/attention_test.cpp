#include "attn/nn/attention.h"

#include <cmath>
#include <optional>

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;
using namespace attn::nn;
using attn::testing::leaf64;

namespace {
Tensor lens(std::vector<std::int64_t> v, Shape shape = {}) { return from_vector(v, shape); }
}  // namespace

TEST(MaskedSoftmax, MasksBeyondValidLengthToExactZero) {
  Tensor X = attn::testing::rand32({2, 2, 4}, 3);
  Tensor y = masked_softmax(X, lens({2, 3}));
  EXPECT_EQ(y.shape(), (Shape{2, 2, 4}));
  for (std::int64_t q = 0; q < 2; ++q) {
    EXPECT_EQ(y.at({0, q, 2}), 0.0);
    EXPECT_EQ(y.at({0, q, 3}), 0.0);
    EXPECT_EQ(y.at({1, q, 3}), 0.0);
    EXPECT_GT(y.at({1, q, 2}), 0.0);
  }
  Tensor rows = sum(y, {-1});
  for (double v : to_vector<double>(rows)) EXPECT_NEAR(v, 1.0, 1e-6);
  // Per-query lengths (B, Q).
  Tensor z = masked_softmax(X, lens({1, 3, 2, 4}, {2, 2}));
  EXPECT_EQ(z.at({0, 0, 1}), 0.0);
  EXPECT_GT(z.at({0, 1, 2}), 0.0);
  EXPECT_EQ(z.at({0, 1, 3}), 0.0);
  EXPECT_EQ(z.at({1, 0, 2}), 0.0);
  EXPECT_GT(z.at({1, 1, 3}), 0.0);
}

TEST(MaskedSoftmax, LengthZeroRowIsUniformWithoutNaNForwardAndBackward) {
  Tensor X = attn::testing::rand32({2, 3, 5}, 4);
  X.requires_grad_();
  Tensor y = masked_softmax(X, lens({0, 2}));
  for (std::int64_t q = 0; q < 3; ++q)
    for (std::int64_t k = 0; k < 5; ++k) EXPECT_FLOAT_EQ(static_cast<float>(y.at({0, q, k})), 0.2f);
  sum(mul(y, attn::testing::rand32({2, 3, 5}, 5))).backward();
  EXPECT_FALSE(has_nonfinite(X.grad()));
}

TEST(MaskedSoftmax, BadValidLensAreClearErrors) {
  Tensor X = zeros({2, 2, 4});
  EXPECT_THROW(masked_softmax(X, lens({1, 2, 3})), ShapeError);
  EXPECT_THROW(masked_softmax(X, lens({1, 2, 3, 4, 5, 6}, {2, 3})), ShapeError);
  EXPECT_THROW(masked_softmax(X, lens({-1, 2})), ValueError);
  try {
    masked_softmax(X, lens({5, 2}));
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "masked_softmax: valid length 5 is outside [0, 4] (the number of keys)");
  }
}

TEST(MaskedSoftmax, Gradcheck) {
  Tensor X = leaf64({2, 3, 5}, 6);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return masked_softmax(v[0], Tensor()); },
                   {X});
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& v) {
        return masked_softmax(v[0], lens({0, 3}));
      },
      {X});
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& v) {
        return masked_softmax(v[0], lens({1, 2, 3, 5, 0, 4}, {2, 3}));
      },
      {X});
}

// d2l 10.3: keys all ones, so every valid key gets the same weight and the
// output is the mean of the first valid_len value rows.
TEST(AdditiveAttention, GoldenOutputOfTheChapter) {
  manual_seed(0);
  Tensor queries = normal(0, 1, {2, 1, 20});
  Tensor keys = ones({2, 10, 2});
  Tensor values = arange(0.0, 40.0, 1.0, DType::f32).reshape({1, 10, 4}).expand({2, 10, 4});
  AdditiveAttention attention(2, 20, 8, 0.1);
  attention.eval();
  Tensor out = attention.forward(queries, keys, values, lens({2, 6}));
  EXPECT_EQ(out.shape(), (Shape{2, 1, 4}));
  std::vector<float> expect = {2, 3, 4, 5, 10, 11, 12, 13};
  auto got = to_vector<float>(out);
  for (std::size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(got[i], expect[i], 1e-4);
  Tensor w = attention.attention_weights;
  EXPECT_EQ(w.shape(), (Shape{2, 1, 10}));
  EXPECT_NEAR(w.at({0, 0, 0}), 0.5, 1e-6);
  EXPECT_EQ(w.at({0, 0, 2}), 0.0);
  EXPECT_NEAR(w.at({1, 0, 5}), 1.0 / 6.0, 1e-6);
  auto names = attention.state_dict();
  EXPECT_TRUE(names.count("W_k.weight") && names.count("W_q.weight") && names.count("w_v.weight"));
  EXPECT_EQ(names.size(), 3u);
}

TEST(DotProductAttention, GoldenOutputOfTheChapter) {
  manual_seed(0);
  Tensor queries = normal(0, 1, {2, 1, 2});
  Tensor keys = ones({2, 10, 2});
  Tensor values = arange(0.0, 40.0, 1.0, DType::f32).reshape({1, 10, 4}).expand({2, 10, 4});
  DotProductAttention attention(0.5);
  attention.eval();
  Tensor out = attention.forward(queries, keys, values, lens({2, 6}));
  std::vector<float> expect = {2, 3, 4, 5, 10, 11, 12, 13};
  auto got = to_vector<float>(out);
  for (std::size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(got[i], expect[i], 1e-4);
}

TEST(Attention, ModulesPassGradcheckWithAndWithoutMasks) {
  AdditiveAttention add_att(3, 5, 4, 0.0);
  add_att.to(DType::f64);
  DotProductAttention dot_att(0.0);
  Tensor q = leaf64({2, 3, 5}, 11), k = leaf64({2, 4, 3}, 12), v = leaf64({2, 4, 3}, 13);
  Tensor qd = leaf64({2, 3, 3}, 14);
  std::vector<Tensor> inputs = {q, k, v};
  for (auto& p : add_att.parameters()) inputs.push_back(p);
  for (Tensor vl : {Tensor(), lens({2, 4}), lens({0, 1, 2, 3, 4, 1}, {2, 3})}) {
    EXPECT_GRADCHECK(
        [&](const std::vector<Tensor>& x) { return add_att.forward(x[0], x[1], x[2], vl); },
        inputs);
    EXPECT_GRADCHECK(
        [&](const std::vector<Tensor>& x) { return dot_att.forward(x[0], x[1], x[2], vl); },
        {qd, k, v});
  }
}

TEST(MultiHeadAttention, ShapesOfTheChapter) {
  MultiHeadAttention attention(100, 100, 100, 100, 5, 0.5);
  attention.eval();
  KeepAttentionWeights keep;
  Tensor X = ones({2, 4, 100}), Y = ones({2, 6, 100});
  Tensor out = attention.forward(X, Y, Y, lens({3, 2}));
  EXPECT_EQ(out.shape(), (Shape{2, 4, 100}));
  EXPECT_EQ(attention.attention_weights().shape(), (Shape{10, 4, 6}));
  // valid_lens repeated per head: rows 0..4 see 3 keys, rows 5..9 see 2.
  EXPECT_EQ(attention.attention_weights().at({4, 0, 3}), 0.0);
  EXPECT_GT(attention.attention_weights().at({4, 0, 2}), 0.0);
  EXPECT_EQ(attention.attention_weights().at({5, 0, 2}), 0.0);
  // Self-attention.
  EXPECT_EQ(attention.forward(X, X, X, lens({3, 2})).shape(), (Shape{2, 4, 100}));
  auto names = attention.state_dict();
  for (const char* n : {"W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight"})
    EXPECT_TRUE(names.count(n)) << n;
}

TEST(MultiHeadAttention, HeadSplitMatchesD2l) {
  Tensor X = arange(0.0, 24.0, 1.0, DType::f32).reshape({1, 3, 8});
  Tensor t = transpose_qkv(X, 2);  // (2, 3, 4): head 0 gets features 0..3
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.at({1, 0, 0}), 4.0);
  EXPECT_EQ(t.at({0, 2, 3}), 19.0);
  EXPECT_EQ(to_vector<float>(transpose_output(t, 2)), to_vector<float>(X));
}

TEST(MultiHeadAttention, BadInputIsAClearError) {
  try {
    MultiHeadAttention bad(30, 30, 30, 30, 4, 0.0);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "MultiHeadAttention: num_hiddens 30 is not divisible by num_heads 4");
  }
  MultiHeadAttention attention(8, 8, 8, 8, 2, 0.0);
  EXPECT_THROW(attention.forward(ones({2, 3, 8}), ones({3, 4, 8}), ones({3, 4, 8})), ShapeError);
  EXPECT_THROW(attention.forward(ones({2, 3, 7}), ones({2, 4, 8}), ones({2, 4, 8})), ShapeError);
  EXPECT_THROW(
      attention.forward(ones({2, 3, 8}), ones({2, 4, 8}), ones({2, 4, 8}), lens({1, 2, 3})),
      ShapeError);
  EXPECT_THROW(attention.forward(ones({2, 3, 8}), ones({2, 4, 8}), ones({2, 4, 8}), lens({1, 9})),
               ValueError);
}

TEST(MultiHeadAttention, Gradcheck) {
  MultiHeadAttention attention(3, 5, 4, 6, 2, 0.0, true);
  attention.to(DType::f64);
  Tensor q = leaf64({2, 3, 5}, 21), k = leaf64({2, 4, 3}, 22), v = leaf64({2, 4, 4}, 23);
  std::vector<Tensor> inputs = {q, k, v};
  for (auto& p : attention.parameters()) inputs.push_back(p);
  for (Tensor vl : {Tensor(), lens({3, 1}), lens({0, 1, 2, 4, 4, 1}, {2, 3})}) {
    EXPECT_GRADCHECK(
        [&](const std::vector<Tensor>& x) { return attention.forward(x[0], x[1], x[2], vl); },
        inputs);
  }
}

namespace {
// Output and every gradient (inputs and parameters) of MHA on one path.
std::vector<std::vector<float>> mha_run(MultiHeadAttention& m, const Tensor& q, const Tensor& kv,
                                        const Tensor& vl, bool causal, std::uint64_t seed) {
  manual_seed(seed);
  Tensor qi = q.detach(), ki = kv.detach();
  qi.requires_grad_();
  ki.requires_grad_();
  for (auto& p : m.parameters()) p.zero_grad();
  Tensor out = m.forward(qi, ki, ki, vl, causal);
  Tensor w = attn::testing::rand32(out.shape(), 99);
  sum(mul(out, w)).backward();
  std::vector<std::vector<float>> r = {to_vector<float>(out), to_vector<float>(qi.grad()),
                                       to_vector<float>(ki.grad())};
  for (auto& p : m.parameters()) r.push_back(to_vector<float>(p.grad()));
  return r;
}
}  // namespace

// The fused kernels and the materialized path (KeepAttentionWeights) are two
// routes to the same numbers: outputs, gradients and dropout masks.
TEST(MultiHeadAttention, FusedPathEqualsMaterializedPath) {
  MultiHeadAttention m(12, 12, 12, 16, 4, 0.3, true);
  Tensor q = attn::testing::rand32({3, 5, 12}, 31), kv = attn::testing::rand32({3, 5, 12}, 32);
  struct Case {
    Tensor vl;
    bool causal;
    bool training;
  };
  std::vector<Case> cases = {{Tensor(), false, false},
                             {lens({5, 2, 0}), false, false},
                             {lens({1, 2, 3, 4, 5, 0, 0, 1, 5, 5, 3, 3, 3, 2, 1}, {3, 5}), false, false},
                             {Tensor(), true, false},
                             {lens({4, 2, 0}), true, false},
                             {lens({5, 2, 0}), false, true},
                             {Tensor(), true, true}};
  for (std::size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    if (cases[c].training) m.train(); else m.eval();
    auto fused = mha_run(m, q, kv, cases[c].vl, cases[c].causal, 7 + c);
    std::vector<std::vector<float>> ref;
    {
      KeepAttentionWeights keep;
      ref = mha_run(m, q, kv, cases[c].vl, cases[c].causal, 7 + c);
      EXPECT_EQ(m.attention_weights().shape(), (Shape{12, 5, 5}));
    }
    m.forward(q, kv, kv, cases[c].vl, cases[c].causal);
    EXPECT_FALSE(m.attention_weights().defined());
    ASSERT_EQ(fused.size(), ref.size());
    for (std::size_t t = 0; t < fused.size(); ++t) {
      ASSERT_EQ(fused[t].size(), ref[t].size());
      for (std::size_t i = 0; i < fused[t].size(); ++i)
        ASSERT_NEAR(fused[t][i], ref[t][i], 1e-5 * (1 + std::fabs(ref[t][i])))
            << "tensor " << t << " element " << i;
    }
  }
}

TEST(DotProductAttention, BothPathsPassGradcheckInTheHeadsLayout) {
  DotProductAttention att(0.0);
  Tensor q = leaf64({2, 3, 2, 4}, 41), k = leaf64({2, 5, 2, 4}, 42), v = leaf64({2, 5, 2, 3}, 43);
  for (bool keep_weights : {false, true}) {
    std::optional<KeepAttentionWeights> keep;
    if (keep_weights) keep.emplace();
    for (Tensor vl : {Tensor(), lens({5, 0}), lens({1, 2, 3, 0, 5, 4}, {2, 3})})
      for (bool causal : {false, true})
        EXPECT_GRADCHECK(
            [&](const std::vector<Tensor>& x) { return att.forward(x[0], x[1], x[2], vl, causal); },
            {q, k, v});
  }
}
