#include "attn/nn/transformer.h"

#include "attn/autograd/node.h"
#include "attn/ops/elementwise.h"
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
