#include "attn/seq2seq/decode.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>

#include "attn/autograd/node.h"
#include "attn/ops/precision.h"
#include "attn/ops/quantize.h"
#include "attn/ops/softmax.h"
#include "kernels/gemm/f32_gemm.h"
#include "ops/precision_internal.h"
#include "testing.h"

using namespace attn;
using namespace attn::seq2seq;

namespace {

using Ids = std::vector<std::int64_t>;
constexpr std::int64_t kBos = 1, kEos = 2;

nn::TransformerConfig config(std::int64_t src_vocab, std::int64_t tgt_vocab) {
  nn::TransformerConfig c;
  c.src_vocab_size = src_vocab;
  c.tgt_vocab_size = tgt_vocab;
  c.num_hiddens = 16;
  c.num_layers = 2;
  c.num_heads = 2;
  c.ffn_num_hiddens = 24;
  c.dropout = 0.0;
  c.max_len = 40;
  return c;
}

// A randomly initialized model whose output layer is scaled by `sharpness`
// (peaked distributions, as a trained model's) and whose <eos> logit is
// raised by `eos_bias` (so that hypotheses end at different lengths).
std::shared_ptr<nn::EncoderDecoder> make_net(const nn::TransformerConfig& c, std::uint64_t seed,
                                             double sharpness, double eos_bias) {
  manual_seed(seed);
  auto net = std::make_shared<nn::EncoderDecoder>(c);
  autograd::NoGradGuard no_grad;
  copy_(net->decoder->dense->weight, mul(net->decoder->dense->weight, sharpness));
  Tensor bias = net->decoder->dense->bias;
  bias.data<float>()[kEos] += static_cast<float>(eos_bias);
  net->eval();
  return net;
}

struct Sources {
  Tensor ids, lens;
  std::int64_t size() const { return ids.size(0); }
};

// B random sources of width T, valid lengths in [1, T], padded with 0.
Sources random_sources(std::int64_t B, std::int64_t T, std::int64_t vocab, std::uint64_t seed) {
  Generator gen(seed);
  Tensor ids = randint(3, vocab, {B, T}, gen);
  Tensor lens = randint(1, T + 1, {B}, gen);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = lens.data<std::int64_t>()[b]; t < T; ++t)
      ids.data<std::int64_t>()[b * T + t] = 0;
  return {ids, lens};
}

Sources row(const Sources& s, std::int64_t b) {
  return {s.ids.narrow(0, b, 1).contiguous(), s.lens.narrow(0, b, 1).contiguous()};
}

// Greedy decoding as plainly as it can be written: every row steps every
// time, argmax of the logits, until <eos> or `limit` tokens. Also returns,
// per row, the smallest gap between the best and second-best logit of the
// steps it decoded (how close it came to a tie).
std::pair<std::vector<Ids>, std::vector<double>> greedy_reference(nn::EncoderDecoder& net,
                                                                  const Sources& s,
                                                                  std::int64_t limit) {
  autograd::NoGradGuard no_grad;
  const std::int64_t B = s.size(), V = net.config.tgt_vocab_size;
  nn::DecoderState state = net.decoder->init_state(net.encoder->forward(s.ids, s.lens), s.lens);
  std::vector<Ids> out(B);
  std::vector<double> gap(B, 1e30);
  std::vector<bool> done(B, false);
  Ids input(B, kBos);
  for (std::int64_t t = 0; t < limit; ++t) {
    Tensor logits = net.decoder->step(from_vector(input, {B, 1}), state).contiguous();
    for (std::int64_t b = 0; b < B; ++b) {
      const float* x = logits.data<float>() + b * V;
      std::int64_t best = 0;
      for (std::int64_t v = 1; v < V; ++v)
        if (x[v] > x[best]) best = v;
      input[b] = best;
      if (done[b]) continue;
      double second = -1e30;
      for (std::int64_t v = 0; v < V; ++v)
        if (v != best) second = std::max(second, static_cast<double>(x[v]));
      gap[b] = std::min(gap[b], x[best] - second);
      if (best == kEos)
        done[b] = true;
      else
        out[b].push_back(best);
    }
  }
  return {out, gap};
}

// log P(ids, then <eos> when `eos`) given source row b, by one teacher-forced
// pass over the whole sequence (no cache).
double teacher_forced_log_prob(nn::EncoderDecoder& net, const Sources& s, const Ids& ids,
                               bool eos) {
  autograd::NoGradGuard no_grad;
  Ids input = {kBos}, target = ids;
  input.insert(input.end(), ids.begin(), ids.end());
  if (eos) {
    target.push_back(kEos);
  } else {
    input.pop_back();  // the last token was never fed
  }
  const std::int64_t T = static_cast<std::int64_t>(input.size());
  Tensor enc = net.encoder->forward(s.ids, s.lens);
  Tensor logp = log_softmax(
      net.decoder->forward(from_vector(input, {1, T}), net.decoder->init_state(enc, s.lens)));
  double sum = 0;
  for (std::int64_t t = 0; t < T; ++t) sum += logp.at({0, t, target[static_cast<std::size_t>(t)]});
  return sum;
}

// Every hypothesis of source row `s` up to `limit` tokens: those that end
// with <eos> after 0..limit-1 other tokens, and those of `limit` tokens that
// stop there; with their log-probabilities by teacher forcing.
std::vector<Hypothesis> all_hypotheses(nn::EncoderDecoder& net, const Sources& s,
                                       std::int64_t limit) {
  const std::int64_t V = net.config.tgt_vocab_size;
  std::vector<Hypothesis> all;
  std::vector<Ids> prefixes = {{}};
  for (std::int64_t len = 0; len <= limit; ++len) {
    std::vector<Ids> longer;
    for (const Ids& p : prefixes) {
      Hypothesis h;
      h.ids = p;
      h.eos = len < limit;
      h.log_prob = teacher_forced_log_prob(net, s, p, h.eos);
      if (len > 0 || h.eos) all.push_back(h);
      if (len < limit)
        for (std::int64_t v = 0; v < V; ++v)
          if (v != kEos) {
            Ids q = p;
            q.push_back(v);
            longer.push_back(q);
          }
    }
    prefixes = std::move(longer);
  }
  return all;
}

// The exhaustive search: all hypotheses scored with `alpha`, best first.
std::vector<Hypothesis> exhaustive(std::vector<Hypothesis> all, double alpha) {
  for (Hypothesis& h : all)
    h.score = h.log_prob / length_penalty(static_cast<std::int64_t>(h.ids.size()) + h.eos, alpha);
  std::sort(all.begin(), all.end(),
            [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  return all;
}

// No other hypothesis of `ranked` scores within `eps` of rank i.
bool clear_rank(const std::vector<Hypothesis>& ranked, std::size_t i, double eps) {
  return (i == 0 || ranked[i - 1].score - ranked[i].score > eps) &&
         (i + 1 == ranked.size() || ranked[i].score - ranked[i + 1].score > eps);
}

void expect_sorted_and_distinct(const std::vector<Hypothesis>& hyps) {
  std::set<std::pair<Ids, bool>> seen;
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(hyps[i - 1].score, hyps[i].score) << "rank " << i;
    }
    EXPECT_TRUE(seen.insert({hyps[i].ids, hyps[i].eos}).second) << "rank " << i << " repeated";
  }
}

}  // namespace

TEST(Decode, LengthPenaltyAndLengthLimit) {
  EXPECT_EQ(length_penalty(7, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(length_penalty(1, 1.0), 1.0);  // ((5 + 1) / 6)^1
  EXPECT_DOUBLE_EQ(length_penalty(7, 0.5), std::sqrt(2.0));  // ((5 + 7) / 6)^0.5
  DecodeOptions o;
  EXPECT_EQ(max_decode_length(5, 1000, o), 1000);  // the model's positions
  o.max_length = 10;
  EXPECT_EQ(max_decode_length(5, 1000, o), 10);
  EXPECT_EQ(max_decode_length(5, 8, o), 8);
  o.max_length_factor = 1.1;
  EXPECT_EQ(max_decode_length(10, 1000, o), 10);  // ceil(11.000000000000002) is 11, then 10
  o.max_length = 0;
  EXPECT_EQ(max_decode_length(10, 1000, o), 11);
  EXPECT_EQ(max_decode_length(3, 1000, o), 4);  // ceil(3.3)
  o.max_length_factor = 0.01;
  EXPECT_EQ(max_decode_length(3, 1000, o), 1);  // at least 1
  EXPECT_EQ(max_decode_length(0, 1000, o), 1);
}

TEST(Decode, BadOptionsAndSourcesAreClearErrors) {
  auto net = make_net(config(9, 7), 1, 1.0, 0.0);
  Sources s = random_sources(2, 5, 9, 1);
  auto error_of = [&](const DecodeOptions& o, const Sources& src) {
    try {
      decode(*net, src.ids, src.lens, kBos, kEos, o);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  DecodeOptions o;
  o.beam_size = 0;
  EXPECT_EQ(error_of(o, s), "decode: beam_size must be at least 1, got 0");
  o = {};
  o.beam_size = 2;
  o.n_best = 3;
  EXPECT_EQ(error_of(o, s), "decode: n_best must be in [1, beam_size 2], got 3");
  o = {};
  o.length_penalty = -1;
  EXPECT_EQ(error_of(o, s), "decode: length_penalty must be a number >= 0, got -1");
  // A source longer than the model's positions is refused, not cut.
  Sources wide = random_sources(2, 45, 9, 2);
  wide.lens.data<std::int64_t>()[0] = 3;
  wide.lens.data<std::int64_t>()[1] = 41;
  EXPECT_EQ(error_of({}, wide),
            "decode: source 1 has 41 ids, more than the model's 40 positions "
            "(max_len)");
  // Padding past max_len is fine: only the valid ids count.
  wide.lens.data<std::int64_t>()[1] = 40;
  EXPECT_EQ(error_of({}, wide), "no error");
  Tensor no_ids;
  EXPECT_THROW(decode(*net, no_ids, s.lens, kBos, kEos), ValueError);
  EXPECT_THROW(decode(*net, s.ids, s.lens, kBos, 7), ValueError);  // eos outside the vocabulary
  EXPECT_TRUE(
      decode(*net, Tensor::empty({0, 5}, DType::i64), Tensor::empty({0}, DType::i64), kBos, kEos)
          .empty());
}

// Beam size 1 is greedy decoding. Sentence by sentence the shapes of every
// product are those of the plain loop, so the ids must be equal. In one batch
// (where finished sentences leave the batch and products change shape, so
// roundings may differ) they must be equal wherever the plain loop never
// came within 1e-3 of a tie between its two best logits.
TEST(Decode, BeamSizeOneIsGreedy) {
  for (std::uint64_t seed : {3, 4}) {
    SCOPED_TRACE(seed);
    auto net = make_net(config(23, 19), seed, 4.0, 1.5);
    Sources s = random_sources(120, 9, 23, seed);
    const std::int64_t limit = 12;
    DecodeOptions o;
    o.max_length = limit;
    auto batched = decode(*net, s.ids, s.lens, kBos, kEos, o);
    auto [reference, gap] = greedy_reference(*net, s, limit);
    std::set<std::size_t> lengths;
    int compared = 0;
    for (std::int64_t b = 0; b < s.size(); ++b) {
      SCOPED_TRACE(b);
      ASSERT_EQ(batched[b].size(), 1u);
      const Hypothesis& h = batched[b][0];
      lengths.insert(h.ids.size());
      if (gap[b] > 1e-3) {
        EXPECT_EQ(h.ids, reference[b]);
        EXPECT_EQ(h.eos, reference[b].size() < static_cast<std::size_t>(limit));
        ++compared;
      }
      EXPECT_NEAR(h.log_prob, teacher_forced_log_prob(*net, row(s, b), h.ids, h.eos), 1e-4);
      EXPECT_EQ(h.score, h.log_prob);  // alpha 0
      if (b < 25) {  // alone: the very shapes of the plain loop
        auto alone = decode(*net, row(s, b).ids, row(s, b).lens, kBos, kEos, o);
        auto [ref_alone, unused] = greedy_reference(*net, row(s, b), limit);
        EXPECT_EQ(alone[0][0].ids, ref_alone[0]);
      }
    }
    EXPECT_GE(compared, 110);
    EXPECT_GE(lengths.size(), 4u) << "the model should give hypotheses of several lengths";
  }
}

// Greedy decoding without scores takes the same tokens, and says the scores
// were not computed (NaN); beam search computes them regardless.
TEST(Decode, GreedyWithoutScoresTakesTheSameTokens) {
  auto net = make_net(config(23, 19), 5, 4.0, 1.5);
  Sources s = random_sources(60, 9, 23, 5);
  for (std::int64_t K : {1, 3}) {
    SCOPED_TRACE(K);
    DecodeOptions with, without;
    with.max_length = without.max_length = 12;
    with.beam_size = without.beam_size = K;
    without.scores = false;
    auto a = decode(*net, s.ids, s.lens, kBos, kEos, with);
    auto b = decode(*net, s.ids, s.lens, kBos, kEos, without);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].size(), 1u);
      ASSERT_EQ(b[i].size(), 1u);
      EXPECT_EQ(a[i][0].ids, b[i][0].ids) << i;
      EXPECT_EQ(a[i][0].eos, b[i][0].eos) << i;
      EXPECT_TRUE(std::isfinite(a[i][0].log_prob)) << i;
      if (K == 1) {
        EXPECT_TRUE(std::isnan(b[i][0].log_prob) && std::isnan(b[i][0].score)) << i;
      } else {
        EXPECT_EQ(a[i][0].log_prob, b[i][0].log_prob) << i;
        EXPECT_EQ(a[i][0].score, b[i][0].score) << i;
      }
    }
  }
}

// A subword-sized output layer (1,100 words) on packed weights: greedy
// decoding without scores takes the model's step_argmax (the int8 screen,
// where an int8 kernel runs: ops/linear_argmax.cpp), with scores every logit;
// each in a scope of its own, the screen's first, so that its steps of
// fewer than 16 rows meet only the copy the screen made. The same tokens,
// and the screen took the rows where it runs. The Bahdanau model (the
// default step_argmax: every logit) likewise.
TEST(Decode, GreedyScreenTakesTheTokensOfTheLogits) {
  auto net = make_net(config(23, 1100), 6, 4.0, 1.5);
  Sources s = random_sources(40, 9, 23, 6);
  autograd::NoGradGuard no_grad;
  DecodeOptions with, without;
  with.max_length = without.max_length = 12;
  without.scores = false;
  const std::int64_t before = attn::detail::argmax_screen_stats().rows;
  std::vector<std::vector<Hypothesis>> a, b;
  {
    PrecisionScope scope(Precision::f32, net->parameters());
    b = decode(*net, s.ids, s.lens, kBos, kEos, without);
  }
  const std::int64_t screened = attn::detail::argmax_screen_stats().rows - before;
  {
    PrecisionScope scope(Precision::f32, net->parameters());
    a = decode(*net, s.ids, s.lens, kBos, kEos, with);
  }
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i][0].ids, b[i][0].ids) << i;
    EXPECT_EQ(a[i][0].eos, b[i][0].eos) << i;
  }
  const char* off = std::getenv("ATTN_NO_ARGMAX_SCREEN");
  const bool screen_off = off && *off && std::string_view(off) != "0";
  if (int8_supported() && attn::detail::f32_gemm_supported() && !screen_off) {
    EXPECT_GT(screened, 40);
  } else {
    EXPECT_EQ(screened, 0);
  }

  nn::BahdanauConfig bc;
  bc.src_vocab_size = 23;
  bc.tgt_vocab_size = 1100;
  bc.embed_size = 8;
  bc.num_hiddens = 16;
  bc.num_layers = 2;
  bc.dropout = 0;
  manual_seed(7);
  nn::BahdanauEncoderDecoder rnn(bc);
  rnn.eval();
  const auto ra = decode(rnn, s.ids, s.lens, kBos, kEos, with);
  const auto rb = decode(rnn, s.ids, s.lens, kBos, kEos, without);
  for (std::size_t i = 0; i < ra.size(); ++i) EXPECT_EQ(ra[i][0].ids, rb[i][0].ids) << i;
}

// Beam search in one batch, where sentences leave at different steps and the
// last sentences' blocks of K rows move into their places: each sentence's
// n-best list is the one it gets alone (ids, and scores within rounding:
// the products have other shapes), and each hypothesis' log-probability is
// its teacher-forced one.
TEST(Decode, BeamBatchEqualsEachSentenceAlone) {
  auto net = make_net(config(23, 19), 11, 3.0, 1.0);
  Sources s = random_sources(40, 8, 23, 11);
  DecodeOptions o;
  o.beam_size = 3;
  o.n_best = 2;
  o.length_penalty = 0.6;
  o.max_length_factor = 1.5;  // limits of 2..12 tokens: sentences leave at different steps
  auto batched = decode(*net, s.ids, s.lens, kBos, kEos, o);
  std::set<std::int64_t> lengths;
  for (std::int64_t b = 0; b < s.size(); ++b) {
    SCOPED_TRACE(b);
    auto alone = decode(*net, row(s, b).ids, row(s, b).lens, kBos, kEos, o);
    ASSERT_EQ(batched[b].size(), alone[0].size());
    for (std::size_t i = 0; i < alone[0].size(); ++i) {
      const Hypothesis& h = batched[b][i];
      if (clear_rank(alone[0], i, 1e-4)) {
        EXPECT_EQ(h.ids, alone[0][i].ids) << "rank " << i;
      }
      EXPECT_NEAR(h.score, alone[0][i].score, 1e-4) << "rank " << i;
      EXPECT_NEAR(h.log_prob, teacher_forced_log_prob(*net, row(s, b), h.ids, h.eos), 1e-4);
      lengths.insert(static_cast<std::int64_t>(h.ids.size()) + h.eos);
    }
  }
  EXPECT_GE(lengths.size(), 4u) << "hypotheses should end at different steps";
}

// With a beam at least as wide as the number of candidates, beam search keeps
// every prefix and is exact: its hypotheses are all hypotheses, ranked as an
// exhaustive search ranks them. A tiny model: 6 target tokens, at most 4.
TEST(Decode, WideBeamEqualsExhaustiveSearch) {
  auto net = make_net(config(9, 6), 7, 2.0, 0.5);
  Sources s = random_sources(3, 4, 9, 7);
  const std::int64_t limit = 4;  // 5^3 live prefixes at most, 781 hypotheses in all
  std::vector<std::vector<Hypothesis>> all;
  for (std::int64_t b = 0; b < s.size(); ++b) all.push_back(all_hypotheses(*net, row(s, b), limit));
  for (double alpha : {0.0, 0.6}) {
    SCOPED_TRACE(alpha);
    DecodeOptions o;
    o.beam_size = 1000;
    o.n_best = 1000;
    o.max_length = limit;
    o.length_penalty = alpha;
    auto beams = decode(*net, s.ids, s.lens, kBos, kEos, o);
    o.n_best = 5;  // the same search, stopped as soon as the 5 best are sure
    auto top5 = decode(*net, s.ids, s.lens, kBos, kEos, o);
    for (std::int64_t b = 0; b < s.size(); ++b) {
      SCOPED_TRACE(b);
      auto truth = exhaustive(all[b], alpha);
      ASSERT_EQ(truth.size(), 781u);
      ASSERT_EQ(beams[b].size(), truth.size());
      expect_sorted_and_distinct(beams[b]);
      std::map<std::pair<Ids, bool>, double> score;
      for (const Hypothesis& h : truth) score[{h.ids, h.eos}] = h.score;
      for (const Hypothesis& h : beams[b]) {
        auto it = score.find({h.ids, h.eos});
        ASSERT_NE(it, score.end());
        EXPECT_NEAR(h.score, it->second, 1e-4);
        EXPECT_DOUBLE_EQ(
            h.score,
            h.log_prob / length_penalty(static_cast<std::int64_t>(h.ids.size()) + h.eos, alpha));
      }
      // Rank by rank the same hypotheses, where no other lies within rounding.
      int clear = 0;
      for (std::size_t i = 0; i < 100; ++i) {
        if (!clear_rank(truth, i, 1e-4)) continue;
        EXPECT_EQ(beams[b][i].ids, truth[i].ids) << "rank " << i;
        EXPECT_EQ(beams[b][i].eos, truth[i].eos) << "rank " << i;
        ++clear;
      }
      EXPECT_GE(clear, 80);
      ASSERT_EQ(top5[b].size(), 5u);
      for (std::size_t i = 0; i < 5; ++i) {
        EXPECT_NEAR(top5[b][i].score, beams[b][i].score, 1e-5);
        if (clear_rank(beams[b], i, 1e-4)) {
          EXPECT_EQ(top5[b][i].ids, beams[b][i].ids);
        }
      }
    }
  }
}

// A narrow beam: n-best lists sorted, distinct, scored right; a wider beam
// never finds a worse best hypothesis on these sentences; sentences of
// different length limits share one batch.
TEST(Decode, NarrowBeamNBestListsAreSortedDistinctAndScored) {
  auto net = make_net(config(23, 19), 11, 3.0, 1.0);
  Sources s = random_sources(40, 8, 23, 11);
  for (double alpha : {0.0, 1.0}) {
    SCOPED_TRACE(alpha);
    DecodeOptions o;
    o.beam_size = 4;
    o.n_best = 4;
    o.length_penalty = alpha;
    o.max_length_factor = 1.5;  // limits of 2..12 tokens
    auto hyps = decode(*net, s.ids, s.lens, kBos, kEos, o);
    for (std::int64_t b = 0; b < s.size(); ++b) {
      SCOPED_TRACE(b);
      ASSERT_FALSE(hyps[b].empty());
      ASSERT_LE(hyps[b].size(), 4u);
      expect_sorted_and_distinct(hyps[b]);
      const std::int64_t limit =
          max_decode_length(s.lens.data<std::int64_t>()[b], net->config.max_len, o);
      for (const Hypothesis& h : hyps[b]) {
        const std::int64_t generated = static_cast<std::int64_t>(h.ids.size()) + h.eos;
        EXPECT_LE(generated, limit);
        if (!h.eos) {
          EXPECT_EQ(generated, limit);
        }
        EXPECT_NEAR(h.log_prob, teacher_forced_log_prob(*net, row(s, b), h.ids, h.eos), 1e-4);
        EXPECT_DOUBLE_EQ(h.score, h.log_prob / length_penalty(generated, alpha));
      }
    }
  }
}

// The attention a hypothesis recorded while beam search reordered its rows
// is the attention of a teacher-forced pass over that hypothesis alone: no
// step's weights come from another beam.
TEST(Decode, RecordedAttentionOfEveryBeamHypothesisEqualsRecomputation) {
  auto net = make_net(config(23, 19), 13, 3.0, 1.0);
  Sources s = random_sources(6, 7, 23, 13);
  DecodeOptions o;
  o.beam_size = 5;
  o.n_best = 5;
  o.max_length = 9;
  o.keep_attention = true;
  auto hyps = decode(*net, s.ids, s.lens, kBos, kEos, o);
  autograd::NoGradGuard no_grad;
  nn::KeepAttentionWeights keep;
  int checked = 0;
  for (std::int64_t b = 0; b < s.size(); ++b) {
    for (const Hypothesis& h : hyps[b]) {
      SCOPED_TRACE(::testing::Message() << "source " << b << ", hypothesis of " << h.ids.size());
      Ids input = {kBos};
      input.insert(input.end(), h.ids.begin(), h.ids.end());
      if (!h.eos) input.pop_back();
      const std::int64_t T = static_cast<std::int64_t>(input.size());
      Sources one = row(s, b);
      Tensor enc = net->encoder->forward(one.ids, one.lens);
      net->decoder->forward(from_vector(input, {1, T}), net->decoder->init_state(enc, one.lens));
      auto weights = net->decoder->attention_weights();
      ASSERT_EQ(h.attention.self.size(), 2u);
      for (std::size_t l = 0; l < 2; ++l) {
        ASSERT_EQ(h.attention.self[l].shape(), weights[0][l].shape());
        ASSERT_EQ(h.attention.cross[l].shape(), weights[1][l].shape());
        EXPECT_LT(max_abs_diff(h.attention.self[l], weights[0][l]), 1e-5) << "layer " << l;
        EXPECT_LT(max_abs_diff(h.attention.cross[l], weights[1][l]), 1e-5) << "layer " << l;
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 25);
  // Without keep_attention nothing is recorded.
  o.keep_attention = false;
  EXPECT_TRUE(decode(*net, s.ids, s.lens, kBos, kEos, o)[0][0].attention.self.empty());
}
