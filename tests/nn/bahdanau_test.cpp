#include "attn/nn/bahdanau.h"

#include "attn/autograd/node.h"
#include "attn/nn/init.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;
using namespace attn::nn;

namespace {
BahdanauConfig d2l_example() {
  BahdanauConfig c;
  c.src_vocab_size = c.tgt_vocab_size = 10;
  c.embed_size = 8;
  c.num_hiddens = 16;
  c.num_layers = 2;
  c.dropout = 0;
  return c;
}
}  // namespace

// d2l 10.4's example: vocab 10, embed 8, hiddens 16, 2 layers, X zeros (4, 7).
TEST(Bahdanau, D2lShapes) {
  BahdanauEncoderDecoder net(d2l_example());
  net.eval();
  Tensor X = zeros({4, 7}, DType::i64);
  GRU::Output enc = net.encoder->forward(X);
  EXPECT_EQ(enc.outputs.shape(), (Shape{7, 4, 16}));
  EXPECT_EQ(enc.state.shape(), (Shape{2, 4, 16}));
  DecoderState state = net.decoder->init_state(enc, Tensor());
  Tensor hidden = state.hidden;
  Tensor out = net.decoder->forward(X, state, hidden);
  EXPECT_EQ(out.shape(), (Shape{4, 7, 10}));
  EXPECT_EQ(state.enc_outputs.shape(), (Shape{4, 7, 16}));
  EXPECT_EQ(hidden.shape(), (Shape{2, 4, 16}));
}

TEST(Bahdanau, ParameterNamesAreD2ls) {
  BahdanauEncoderDecoder net(d2l_example());
  auto named = net.named_parameters();
  auto shapes = bahdanau_parameter_shapes(net.config);
  ASSERT_EQ(named.size(), shapes.size());
  for (std::size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(named[i].first, shapes[i].first);
    EXPECT_EQ(named[i].second.shape(), shapes[i].second) << named[i].first;
  }
  EXPECT_EQ(named.front().first, "encoder.embedding.weight");
  EXPECT_EQ(named[1].first, "encoder.rnn.weight_ih_l0");
  EXPECT_EQ(shapes[13].first, "decoder.rnn.weight_ih_l0");
  EXPECT_EQ(shapes[13].second, (Shape{48, 24}));
}

// Decoding one token at a time with step() gives the teacher-forced logits,
// and select_rows carries the hidden state with the rows.
TEST(Bahdanau, StepsEqualTeacherForcing) {
  BahdanauConfig c = d2l_example();
  c.tgt_vocab_size = 13;
  BahdanauEncoderDecoder net(c);
  net.eval();
  autograd::NoGradGuard no_grad;
  Tensor src = from_vector<std::int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 0, 0}, {3, 4});
  Tensor len = from_vector<std::int64_t>({4, 4, 1}, {3});
  Tensor tgt = from_vector<std::int64_t>({1, 5, 7, 2, 3, 4, 12, 11, 0}, {3, 3});
  Tensor full = net.forward(src, tgt, len);
  DecoderState state = net.begin(src, len);
  for (std::int64_t t = 0; t < 3; ++t) {
    Tensor logits = net.step(tgt.narrow(1, t, 1).contiguous(), state);
    EXPECT_LT(max_abs_diff(logits, full.narrow(1, t, 1)), 1e-6) << t;
  }
  EXPECT_EQ(state.steps, 3);
  // Rows reordered: row 0 continues what row 2 was.
  DecoderState s2 = net.begin(src, len);
  net.step(tgt.narrow(1, 0, 1).contiguous(), s2);
  s2.select_rows(from_vector<std::int64_t>({2, 0}, {2}));
  Tensor next = net.step(from_vector<std::int64_t>({static_cast<std::int64_t>(tgt.at({2, 1})),
                                                    static_cast<std::int64_t>(tgt.at({0, 1}))},
                                                   {2, 1})
                             .to(DType::i64),
                         s2);
  EXPECT_LT(max_abs_diff(next.select(0, 0), full.select(0, 2).narrow(0, 1, 1)), 1e-6);
  EXPECT_LT(max_abs_diff(next.select(0, 1), full.select(0, 0).narrow(0, 1, 1)), 1e-6);
}

TEST(Bahdanau, AttentionWeightsAreKeptPerStep) {
  BahdanauEncoderDecoder net(d2l_example());
  net.eval();
  Tensor src = from_vector<std::int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor len = from_vector<std::int64_t>({3, 2}, {2});
  Tensor tgt = from_vector<std::int64_t>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  {
    KeepAttentionWeights keep;
    net.forward(src, tgt, len);
  }
  AttentionWeights w = net.attention_weights();
  EXPECT_TRUE(w.encoder.empty());
  EXPECT_TRUE(w.decoder_self.empty());
  ASSERT_EQ(w.decoder_cross.size(), 1u);
  EXPECT_EQ(w.decoder_cross[0].shape(), (Shape{2, 4, 3}));
  // Rows sum to 1; row 1's third key is masked.
  EXPECT_LT(max_abs_diff(sum(w.decoder_cross[0], {2}), ones({2, 4})), 1e-6);
  EXPECT_LT(max(abs(w.decoder_cross[0].select(0, 1).select(1, 2)), 0).item<float>(), 1e-6);
}

// The whole model in f64, every parameter, against central differences
// (dropout 0; the embeddings' ids are fixed).
TEST(Bahdanau, Gradcheck) {
  BahdanauConfig c;
  c.src_vocab_size = 5;
  c.tgt_vocab_size = 6;
  c.embed_size = 3;
  c.num_hiddens = 4;
  c.num_layers = 2;
  c.dropout = 0;
  BahdanauEncoderDecoder net(c);
  net.to(DType::f64);
  Tensor src = from_vector<std::int64_t>({1, 2, 3, 4, 0, 0}, {2, 3});
  Tensor len = from_vector<std::int64_t>({3, 1}, {2});
  Tensor tgt = from_vector<std::int64_t>({1, 5, 2, 3, 4, 0}, {2, 3});
  // The parameters themselves are the checked inputs: gradcheck perturbs
  // them in place and the model reads them.
  EXPECT_GRADCHECK([&](const std::vector<Tensor>&) { return net.forward(src, tgt, len); },
                   net.parameters());
}

TEST(Bahdanau, XavierInitReachesTheGruWeights) {
  BahdanauEncoderDecoder net(d2l_example());
  Tensor before = net.encoder->rnn->layers[0][0].clone();
  Tensor bias = net.encoder->rnn->layers[0][2].clone();
  xavier_init(net);
  EXPECT_GT(max_abs_diff(before, net.encoder->rnn->layers[0][0]), 0.0);
  EXPECT_EQ(max_abs_diff(bias, net.encoder->rnn->layers[0][2]), 0.0);
  // Xavier bound for (48, 8): sqrt(6 / 56).
  EXPECT_LE(max(abs(net.encoder->rnn->layers[0][0].flatten()), 0).item<float>(),
            std::sqrt(6.0 / 56.0) + 1e-6);
}
