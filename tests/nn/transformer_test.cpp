#include "attn/nn/transformer.h"

#include <algorithm>
#include <random>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/index.h"
#include "testing.h"

using namespace attn;
using namespace attn::nn;
using attn::testing::leaf64;

namespace {
Tensor lens(std::vector<std::int64_t> v, Shape shape = {}) { return from_vector(v, shape); }

TransformerConfig small_config() {
  TransformerConfig c;
  c.src_vocab_size = 11;
  c.tgt_vocab_size = 13;
  c.num_hiddens = 8;
  c.num_layers = 2;
  c.num_heads = 2;
  c.ffn_num_hiddens = 12;
  c.dropout = 0.0;
  c.max_len = 50;
  return c;
}
}  // namespace

// d2l 10.7 prints these shapes.
TEST(Transformer, ShapesOfTheChapter) {
  Tensor X = ones({2, 100, 24});
  Tensor valid_lens = lens({3, 2});
  EncoderBlock encoder_blk(24, 24, 24, 24, {100, 24}, 24, 48, 8, 0.5);
  encoder_blk.eval();
  EXPECT_EQ(encoder_blk.forward(X, valid_lens).shape(), (Shape{2, 100, 24}));

  TransformerConfig c;
  c.src_vocab_size = c.tgt_vocab_size = 200;
  c.num_hiddens = 24;
  c.num_heads = 8;
  c.ffn_num_hiddens = 48;
  c.num_layers = 2;
  c.dropout = 0.5;
  c.norm_shape = {100, 24};
  TransformerEncoder encoder(c);
  encoder.eval();
  Tensor ids = ones({2, 100}, DType::i64);
  EXPECT_EQ(encoder.forward(ids, valid_lens).shape(), (Shape{2, 100, 24}));

  DecoderBlock decoder_blk(24, 24, 24, 24, {100, 24}, 24, 48, 8, 0.5, 0);
  decoder_blk.eval();
  Tensor enc = encoder_blk.forward(X, valid_lens);
  EXPECT_EQ(decoder_blk.forward(X, enc, valid_lens).shape(), (Shape{2, 100, 24}));
}

TEST(Transformer, ParameterNamesAreD2lStateDictNames) {
  EncoderDecoder net(small_config());
  auto state = net.state_dict();
  for (const char* name :
       {"encoder.embedding.weight", "encoder.blks.block0.attention.W_q.weight",
        "encoder.blks.block1.attention.W_o.weight", "encoder.blks.block0.addnorm1.ln.weight",
        "encoder.blks.block0.ffn.dense1.weight", "encoder.blks.block0.ffn.dense2.bias",
        "decoder.blks.block1.attention1.W_k.weight", "decoder.blks.block0.attention2.W_v.weight",
        "decoder.blks.block0.addnorm3.ln.bias", "decoder.dense.weight", "decoder.dense.bias",
        "decoder.embedding.weight"})
    EXPECT_TRUE(state.count(name)) << name;
  EXPECT_FALSE(state.count("encoder.blks.block0.attention.W_q.bias"));  // d2l: no bias
}

TEST(Transformer, ParameterShapesWithoutAModelAreTheModels) {
  for (bool use_bias : {false, true})
    for (std::int64_t layers : {1, 3}) {
      TransformerConfig c = small_config();
      c.use_bias = use_bias;
      c.num_layers = layers;
      std::vector<std::pair<std::string, Shape>> built;
      for (auto& [name, p] : EncoderDecoder(c).named_parameters())
        built.emplace_back(name, p.shape());
      EXPECT_EQ(transformer_parameter_shapes(c), built)
          << "use_bias " << use_bias << ", layers " << layers;
    }
}

TEST(Transformer, KvCacheDecodingEqualsFullRecomputation) {
  manual_seed(5);
  EncoderDecoder net(small_config());
  net.eval();
  autograd::NoGradGuard no_grad;
  Tensor src = randint(0, 11, {3, 6}, default_generator());
  Tensor src_lens = lens({6, 3, 1});
  Tensor tgt = randint(0, 13, {3, 7}, default_generator());
  Tensor enc = net.encoder->forward(src, src_lens);
  // Full teacher-forced pass, causal.
  Tensor full = net.decoder->forward(tgt, net.decoder->init_state(enc, src_lens));
  // Token by token through the cache.
  DecoderState state = net.decoder->init_state(enc, src_lens);
  for (std::int64_t t = 0; t < 7; ++t) {
    Tensor step = net.decoder->step(tgt.narrow(1, t, 1).contiguous(), state);
    EXPECT_LT(max_abs_diff(step, full.narrow(1, t, 1)), 1e-5) << "step " << t;
  }
  EXPECT_EQ(state.steps, 7);
  EXPECT_GE(state.self_k[0].size(1), 7);  // a buffer with room to grow
  // Several tokens at once through the cache: the first 3, then 4 more.
  DecoderState s2 = net.decoder->init_state(enc, src_lens);
  Tensor a = net.decoder->step(tgt.narrow(1, 0, 3).contiguous(), s2);
  Tensor b = net.decoder->step(tgt.narrow(1, 3, 4).contiguous(), s2);
  EXPECT_LT(max_abs_diff(a, full.narrow(1, 0, 3)), 1e-5);
  EXPECT_LT(max_abs_diff(b, full.narrow(1, 3, 4)), 1e-5);
}

// Beam search keeps some rows of the state (repeated, reordered, dropped) and
// goes on decoding: the cache it carries must give what recomputing each new
// row's whole prefix from scratch gives.
TEST(Transformer, SelectingCacheRowsEqualsRecomputation) {
  manual_seed(6);
  EncoderDecoder net(small_config());
  net.eval();
  autograd::NoGradGuard no_grad;
  // Rows 0 and 1 translate one source, rows 2 and 3 another, row 4 a third.
  Tensor src = randint(0, 11, {5, 6}, default_generator());
  for (std::int64_t t = 0; t < 6; ++t) {
    src.data<std::int64_t>()[6 + t] = src.data<std::int64_t>()[t];
    src.data<std::int64_t>()[18 + t] = src.data<std::int64_t>()[12 + t];
  }
  Tensor src_lens = lens({6, 6, 4, 4, 2});
  Tensor prefix = randint(0, 13, {5, 3}, default_generator());
  Tensor more = randint(0, 13, {5, 4}, default_generator());
  Tensor enc = net.encoder->forward(src, src_lens);

  // New row i continues old row rows[i]; its source is that of old row
  // encoder_rows[i] (empty: rows[i]). Selected twice in a row, so that the
  // second selection works in place on the state's own buffers.
  auto check = [&](const std::vector<std::int64_t>& first, const std::vector<std::int64_t>& rows,
                   const std::vector<std::int64_t>& encoder_rows) {
    DecoderState state = net.decoder->init_state(enc, src_lens);
    for (std::int64_t t = 0; t < 2; ++t)  // grown one step at a time, as decoding does
      net.decoder->step(prefix.narrow(1, t, 1).contiguous(), state);
    const std::int64_t m = static_cast<std::int64_t>(first.size());
    state.select_rows(from_vector(first, {m}));
    Tensor idx1 = from_vector(first, {m});
    net.decoder->step(index_select(prefix, 0, idx1).narrow(1, 2, 1).contiguous(), state);
    const std::int64_t n = static_cast<std::int64_t>(rows.size());
    // The cache is read through the table of rows: selecting moves nothing.
    const Tensor buf_before = state.self_k[0].clone();
    const float* buf = state.self_k[0].data<float>();
    if (encoder_rows.empty()) {
      state.select_rows(from_vector(rows, {n}));
    } else {
      state.select_rows(from_vector(rows, {n}), from_vector(encoder_rows, {n}));
    }
    EXPECT_EQ(state.batch_size(), n);
    EXPECT_EQ(state.steps, 3);
    EXPECT_EQ(state.self_k[0].data<float>(), buf);
    EXPECT_EQ(max_abs_diff(state.self_k[0], buf_before), 0.0);
    ASSERT_EQ(state.self_rows.shape(), (Shape{n, 3}));
    for (std::int64_t i = 0; i < n; ++i)  // the last step of each row came from its parent row
      EXPECT_EQ(state.self_rows.data<std::int64_t>()[i * 3 + 2], rows[static_cast<std::size_t>(i)]);
    // The source row of each new row.
    std::vector<std::int64_t> source;
    for (std::int64_t r : rows) source.push_back(first[static_cast<std::size_t>(r)]);
    Tensor idx = from_vector(source, {n});
    Tensor next = index_select(more, 0, idx);
    Tensor cached = net.decoder->step(next, state);  // 4 more tokens at once
    // From scratch: each new row's source and its whole target prefix.
    Tensor full_tgt = cat({index_select(prefix, 0, idx), next}, 1);
    Tensor src_rows = index_select(src, 0, idx), len_rows = index_select(src_lens, 0, idx);
    Tensor full = net.decoder->forward(
        full_tgt, net.decoder->init_state(net.encoder->forward(src_rows, len_rows), len_rows));
    EXPECT_LT(max_abs_diff(cached, full.narrow(1, 3, 4)), 1e-5);
    EXPECT_GE(state.self_k[0].size(1), 7);
  };
  Tensor enc_before = enc.clone();
  check({0, 1, 2, 3, 4}, {4, 0, 0, 3}, {});  // dropped, repeated, reordered: in place
  check({0, 1, 2, 3, 4}, {2, 0, 1, 2, 4, 3, 1}, {});  // more rows than before: new buffers
  check({4, 0, 1, 2}, {3, 1, 2, 0}, {});  // a permutation, in place
  // Rows 0 and 1 of the first selection share a source (and 2 and 3): beams
  // reordered within each source keep the encoder side where it is...
  check({0, 1, 2, 3, 4}, {1, 1, 3, 2, 4}, {0, 1, 2, 3, 4});
  // ... and a source that leaves only closes the gap.
  check({0, 1, 2, 3, 4}, {3, 2, 4}, {2, 3, 4});
  check({0, 1, 2, 3, 4}, {0, 1, 4}, {0, 1, 4});
  // Greedy decoding's gaps filled from the end (every rows[i] >= i, not in
  // order): forward in place.
  check({0, 1, 2, 3, 4}, {4, 1, 3}, {4, 1, 3});
  check({0, 1, 2, 3, 4}, {3, 4, 2, 4}, {});
  // The caller's encoder outputs were never written.
  EXPECT_EQ(max_abs_diff(enc, enc_before), 0.0);
  DecoderState state = net.decoder->init_state(enc, src_lens);
  net.decoder->step(prefix.narrow(1, 0, 1).contiguous(), state);
  EXPECT_THROW(state.select_rows(from_vector(std::vector<std::int64_t>{5}, {1})), ValueError);
  EXPECT_THROW(state.select_rows(from_vector(std::vector<std::int64_t>{0, 1}, {2}),
                                 from_vector(std::vector<std::int64_t>{0}, {1})),
               ValueError);
}

// The in-place gather of the cache rows against the plain one, on random
// selections of every kind (kept, dropped, repeated, permuted in cycles):
// each row of a buffer holds its row number in its valid steps and another
// value past them, which the gather never touches.
TEST(DecoderState, RowsGatheredInPlaceAsIndexSelect) {
  std::mt19937 gen(17);
  for (int trial = 0; trial < 300; ++trial) {
    const std::int64_t B = 1 + trial % 23, cap = 6, steps = 1 + trial % cap, H = 2, d = 3;
    DecoderState state;
    state.enc_valid_lens = full({B}, 1.0, DType::i64);
    state.shares_encoder_rows = true;
    state.steps = steps;
    Tensor buf = Tensor::empty({B, cap, H, d}, DType::f32);
    float* p = buf.data<float>();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t c = 0; c < cap; ++c)
        for (std::int64_t e = 0; e < H * d; ++e)
          p[(b * cap + c) * H * d + e] = c < steps ? static_cast<float>(b * 100 + c) : -1.0f;
    const Tensor before = buf.clone();
    state.self_k = {buf};
    state.self_v = {Tensor()};
    std::uniform_int_distribution<std::int64_t> pick(0, B - 1), count(1, B);
    std::vector<std::int64_t> rows;
    if (trial % 3 == 0) {  // a permutation of all rows: cycles only
      rows.resize(static_cast<std::size_t>(B));
      for (std::int64_t i = 0; i < B; ++i) rows[static_cast<std::size_t>(i)] = i;
      std::shuffle(rows.begin(), rows.end(), gen);
    } else {  // any rows, repeats allowed, at most as many as before
      const std::int64_t n = count(gen);
      for (std::int64_t i = 0; i < n; ++i) rows.push_back(pick(gen));
    }
    const std::int64_t n = static_cast<std::int64_t>(rows.size());
    state.select_rows(from_vector(rows, {n}));
    ASSERT_EQ(state.self_k[0].size(0), n);
    EXPECT_EQ(state.self_k[0].data<float>(), p) << "gathered in the buffer's own memory";
    const Tensor expect = index_select(before, 0, from_vector(rows, {n}));
    const Tensor got = state.self_k[0];
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t c = 0; c < cap; ++c)
        for (std::int64_t e = 0; e < H * d; ++e) {
          const std::int64_t at = (i * cap + c) * H * d + e;
          ASSERT_EQ(got.data<float>()[at], c < steps ? expect.data<float>()[at] : -1.0f)
              << "trial " << trial << ", row " << i << " (from "
              << rows[static_cast<std::size_t>(i)] << "), step " << c;
        }
  }
}

// Both attention paths: the fused kernels, and (weights kept) the materialized one.
void gradcheck_blocks() {
  EncoderBlock eb(6, 6, 6, 6, {6}, 6, 7, 2, 0.0);
  eb.to(DType::f64);
  Tensor X = leaf64({2, 4, 6}, 1);
  std::vector<Tensor> in = {X};
  for (auto& p : eb.parameters()) in.push_back(p);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& v) {
        return eb.forward(v[0], lens({4, 2}));
      },
      in);

  DecoderBlock db(6, 6, 6, 6, {6}, 6, 7, 2, 0.0, 0);
  db.to(DType::f64);
  Tensor Y = leaf64({2, 3, 6}, 2), E = leaf64({2, 4, 6}, 3);
  std::vector<Tensor> in2 = {Y, E};
  for (auto& p : db.parameters()) in2.push_back(p);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& v) {
        return db.forward(v[0], v[1], lens({4, 1}));
      },
      in2);
}

TEST(Transformer, EncoderAndDecoderBlocksPassGradcheck) {
  {
    SCOPED_TRACE("fused attention");
    gradcheck_blocks();
  }
  SCOPED_TRACE("materialized attention");
  KeepAttentionWeights keep;
  gradcheck_blocks();
}

TEST(Transformer, BadConfigIsAClearError) {
  TransformerConfig c = small_config();
  c.num_heads = 3;
  try {
    EncoderDecoder net(c);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "MultiHeadAttention: num_hiddens 8 is not divisible by num_heads 3");
  }
  c = small_config();
  c.num_layers = 0;
  EXPECT_THROW(EncoderDecoder{c}, ValueError);
}
