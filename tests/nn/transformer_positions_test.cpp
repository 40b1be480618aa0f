// The Transformer with every kind of positions (sinusoidal, learned, rotary,
// ALiBi, T5's relative bias) and with grouped key/value heads: parameter
// shapes, the f64 gradient check of the whole model, the fused path against
// the materialized one, and decoding (the KV cache, and rows at their own
// positions) against the full forward.
#include <memory>
#include <string>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/nn/transformer.h"
#include "attn/ops/index.h"
#include "testing.h"

using namespace attn;
using namespace attn::nn;

namespace {

const Positions kAll[] = {Positions::sinusoidal, Positions::learned, Positions::rotary,
                          Positions::alibi, Positions::relative};

TransformerConfig config(Positions p, std::int64_t kv_heads) {
  TransformerConfig c;
  c.src_vocab_size = 11;
  c.tgt_vocab_size = 13;
  c.num_hiddens = 16;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = kv_heads;
  c.ffn_num_hiddens = 12;
  c.dropout = 0.0;
  c.max_len = 50;
  c.positions = p;
  return c;
}

std::string name(Positions p, std::int64_t kv) {
  return fmt::format("{} positions, {} kv heads", enum_name(p), kv);
}

// Random weights everywhere, the position tables included (the relative
// bias starts at zero, which would hide a wrong offset).
void randomize(EncoderDecoder& net, std::uint64_t seed) {
  Generator gen(seed);
  autograd::NoGradGuard no_grad;
  for (auto& [n, p] : net.named_parameters())
    copy_(p, uniform(-0.5, 0.5, p.shape(), gen, p.dtype()));
}

// A model of config(p, kv) with random weights, in eval mode.
std::unique_ptr<EncoderDecoder> eval_model(Positions p, std::int64_t kv, std::uint64_t seed) {
  auto net = std::make_unique<EncoderDecoder>(config(p, kv));
  randomize(*net, seed);
  net->eval();
  return net;
}

}  // namespace

TEST(TransformerPositions, ParameterShapesWithoutAModelAreTheModels) {
  for (Positions p : kAll)
    for (std::int64_t kv : {0, 1, 2}) {
      const TransformerConfig c = config(p, kv);
      std::vector<std::pair<std::string, Shape>> built;
      for (auto& [n, t] : EncoderDecoder(c).named_parameters()) built.emplace_back(n, t.shape());
      EXPECT_EQ(transformer_parameter_shapes(c), built) << name(p, kv);
    }
  // Grouped heads shrink W_k and W_v only.
  auto state = EncoderDecoder(config(Positions::rotary, 1)).state_dict();
  EXPECT_EQ(state.at("decoder.blks.block0.attention1.W_k.weight").shape(), (Shape{4, 16}));
  EXPECT_EQ(state.at("decoder.blks.block0.attention1.W_q.weight").shape(), (Shape{16, 16}));
  EXPECT_EQ(EncoderDecoder(config(Positions::relative, 0))
                .state_dict()
                .count("encoder.relative_bias.weight"),
            1u);
}

// The whole model in f64 against central differences, every parameter.
TEST(TransformerPositions, WholeModelPassesGradcheck) {
  for (Positions p : kAll) {
    SCOPED_TRACE(name(p, 1));
    TransformerConfig c = config(p, 1);
    c.num_hiddens = 4;
    c.num_heads = 2;
    c.num_layers = 1;
    c.ffn_num_hiddens = 5;
    c.src_vocab_size = c.tgt_vocab_size = 6;
    EncoderDecoder net(c);
    net.to(DType::f64);
    randomize(net, 3);
    Generator gen(4);
    const Tensor src = randint(0, 6, {2, 4}, gen), tgt = randint(0, 6, {2, 3}, gen);
    const Tensor lens = from_vector<std::int64_t>({4, 2});
    std::vector<Tensor> params = net.parameters();
    EXPECT_GRADCHECK([&](const std::vector<Tensor>&) { return net.forward(src, tgt, lens); },
                     params);
  }
}

// The fused kernels and the materialized path (weights kept) agree.
TEST(TransformerPositions, FusedEqualsMaterialized) {
  for (Positions p : kAll)
    for (std::int64_t kv : {0, 2}) {
      SCOPED_TRACE(name(p, kv));
      auto model = eval_model(p, kv, 5);
      EncoderDecoder& net = *model;
      autograd::NoGradGuard no_grad;
      Generator gen(6);
      const Tensor src = randint(0, 11, {3, 9}, gen), tgt = randint(0, 13, {3, 11}, gen);
      const Tensor lens = from_vector<std::int64_t>({9, 4, 1});
      const Tensor fused = net.forward(src, tgt, lens);
      KeepAttentionWeights keep;
      EXPECT_LT(max_abs_diff(fused, net.forward(src, tgt, lens)), 2e-5);
    }
}

// Token by token (and three, then four at once) through the cache: the
// full forward's logits.
TEST(TransformerPositions, KvCacheDecodingEqualsFullForward) {
  for (Positions p : kAll)
    for (std::int64_t kv : {0, 1}) {
      SCOPED_TRACE(name(p, kv));
      auto model = eval_model(p, kv, 7);
      EncoderDecoder& net = *model;
      autograd::NoGradGuard no_grad;
      Generator gen(8);
      const Tensor src = randint(0, 11, {3, 6}, gen), tgt = randint(0, 13, {3, 7}, gen);
      const Tensor lens = from_vector<std::int64_t>({6, 3, 1});
      const Tensor enc = net.encoder->forward(src, lens);
      const Tensor full = net.decoder->forward(tgt, net.decoder->init_state(enc, lens));
      DecoderState s = net.decoder->init_state(enc, lens);
      for (std::int64_t t = 0; t < 7; ++t)
        EXPECT_LT(max_abs_diff(net.decoder->step(tgt.narrow(1, t, 1).contiguous(), s),
                               full.narrow(1, t, 1)),
                  2e-5)
            << "step " << t;
      DecoderState s2 = net.decoder->init_state(enc, lens);
      const Tensor a = net.decoder->step(tgt.narrow(1, 0, 3).contiguous(), s2);
      const Tensor b = net.decoder->step(tgt.narrow(1, 3, 4).contiguous(), s2);
      EXPECT_LT(max_abs_diff(a, full.narrow(1, 0, 3)), 2e-5);
      EXPECT_LT(max_abs_diff(b, full.narrow(1, 3, 4)), 2e-5);
    }
}

// Continuous batching: two sentences, the second starting two steps after
// the first, each row at its own position: each row's logits are those of
// its sentence decoded alone.
TEST(TransformerPositions, RowsAtTheirOwnPositionsEqualStep) {
  for (Positions p : kAll)
    for (std::int64_t kv : {0, 2}) {
      SCOPED_TRACE(name(p, kv));
      auto model = eval_model(p, kv, 9);
      EncoderDecoder& net = *model;
      autograd::NoGradGuard no_grad;
      Generator gen(10);
      const std::int64_t S = 5, T = 6;
      const Tensor src = randint(0, 11, {2, S}, gen), tgt = randint(0, 13, {2, T}, gen);
      std::vector<std::vector<Tensor>> alone(2);
      for (std::int64_t b = 0; b < 2; ++b) {
        DecoderState s =
            net.begin(src.narrow(0, b, 1).contiguous(), from_vector<std::int64_t>({S}));
        for (std::int64_t t = 0; t < T; ++t)
          alone[static_cast<std::size_t>(b)].push_back(
              net.step(tgt.narrow(0, b, 1).narrow(1, t, 1).contiguous(), s));
      }
      SlotCache cache;
      net.encode_sources(src, {0, 1}, cache);
      const std::int64_t starts[2] = {0, 2};
      for (std::int64_t g = 0; g < T + 2; ++g) {
        std::vector<std::int64_t> sentences, tokens, positions;
        for (std::int64_t b = 0; b < 2; ++b) {
          const std::int64_t t = g - starts[b];
          if (t < 0 || t >= T) continue;
          sentences.push_back(b);
          positions.push_back(t);
          tokens.push_back(tgt.data<std::int64_t>()[b * T + t]);
        }
        const auto R = static_cast<std::int64_t>(sentences.size());
        std::int64_t P = 0;
        for (std::int64_t t : positions) P = std::max(P, t + 1);
        RowStep step;
        step.tokens = from_vector(tokens, {R, 1});
        step.positions = from_vector(positions, {R});
        step.source_slots = from_vector(sentences, {R});
        step.source_lens = full({R}, static_cast<double>(S), DType::i64);
        step.write_rows = from_vector(sentences, {R});  // cache row = sentence
        std::vector<std::int64_t> key_rows;
        for (std::int64_t r = 0; r < R; ++r)
          for (std::int64_t q = 0; q < P; ++q)
            key_rows.push_back(sentences[static_cast<std::size_t>(r)]);
        step.key_rows = from_vector(key_rows, {R, P});
        const Tensor logits = net.step_rows(step, cache);
        for (std::int64_t r = 0; r < R; ++r) {
          const auto b = static_cast<std::size_t>(sentences[static_cast<std::size_t>(r)]);
          const auto t = static_cast<std::size_t>(positions[static_cast<std::size_t>(r)]);
          EXPECT_LT(max_abs_diff(logits.narrow(0, r, 1), alone[b][t]), 2e-5)
              << "sentence " << b << ", position " << t;
        }
      }
    }
}

// Grouped heads shrink the decoding cache: bytes per cached token.
TEST(TransformerPositions, GroupedHeadsShrinkTheCache) {
  std::int64_t bytes[3] = {0, 0, 0};
  int i = 0;
  for (std::int64_t kv : {4, 2, 1}) {
    EncoderDecoder net(config(Positions::rotary, kv));
    net.eval();
    Generator gen(12);
    DecoderState s = net.begin(randint(0, 11, {2, 5}, gen), from_vector<std::int64_t>({5, 5}));
    net.step(randint(0, 13, {2, 3}, gen), s);
    bytes[i++] = s.self_k[0].numel() + s.self_v[0].numel();
  }
  EXPECT_EQ(bytes[0], 2 * bytes[1]);
  EXPECT_EQ(bytes[0], 4 * bytes[2]);
}

TEST(TransformerPositions, BadConfigsAreClearErrors) {
  TransformerConfig c = config(Positions::sinusoidal, 3);
  try {
    EncoderDecoder net(c);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "Transformer: num_kv_heads 3 does not divide num_heads 4");
  }
  c = config(Positions::rotary, 0);
  c.num_hiddens = 12;  // head dim 3
  EXPECT_THROW(EncoderDecoder{c}, ValueError);
}
