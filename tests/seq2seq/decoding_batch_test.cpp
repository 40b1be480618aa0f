// DecodingBatch (seq2seq/decode.h): sentences that join and leave a decoding
// batch at any step get, bit for bit, the hypotheses decode() gives each of
// them alone (the plain reference: one sentence, one batch); whatever else
// shares their steps, whenever they join, and whichever leave early.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "attn/autograd/node.h"
#include "attn/nn/bahdanau.h"
#include "attn/ops/precision.h"
#include "attn/ops/quantize.h"
#include "attn/seq2seq/decode.h"
#include "testing.h"

using namespace attn;
using namespace attn::seq2seq;

namespace {

using Ids = std::vector<std::int64_t>;
constexpr std::int64_t kBos = 1, kEos = 2;

// A random Transformer; `hidden` 16 keeps every product small (the unpacked
// paths outside a BatchInvariant scope), 64 makes the packed ones.
std::shared_ptr<nn::EncoderDecoder> make_net(std::int64_t hidden, std::uint64_t seed) {
  nn::TransformerConfig c;
  c.src_vocab_size = 23;
  c.tgt_vocab_size = 19;
  c.num_hiddens = hidden;
  c.num_layers = 2;
  c.num_heads = 2;
  c.ffn_num_hiddens = 2 * hidden;
  c.dropout = 0.0;
  c.max_len = 40;
  manual_seed(seed);
  auto net = std::make_shared<nn::EncoderDecoder>(c);
  autograd::NoGradGuard no_grad;
  // Peaked distributions and an earlier <eos>: hypotheses of many lengths.
  copy_(net->decoder->dense->weight, mul(net->decoder->dense->weight, 3.0));
  net->decoder->dense->bias.data<float>()[kEos] += 1.0f;
  net->eval();
  return net;
}

// n sources of 1 to 9 ids (the last one <eos>), several of each length.
std::vector<Ids> make_sources(int n, std::uint64_t seed) {
  Generator gen(seed);
  std::vector<Ids> out;
  for (int i = 0; i < n; ++i) {
    const std::int64_t len = 1 + i % 9;
    Tensor ids = randint(3, 23, {len}, gen);
    Ids s = to_vector<std::int64_t>(ids);
    s.back() = kEos;
    out.push_back(s);
  }
  return out;
}

// Greedy with and without scores, beam search with its n-best list.
std::vector<DecodeOptions> option_mix() {
  DecodeOptions greedy;
  DecodeOptions greedy_fast;
  greedy_fast.scores = false;
  DecodeOptions beam;
  beam.beam_size = 3;
  beam.n_best = 2;
  beam.length_penalty = 0.6;
  beam.max_length_factor = 2;
  return {greedy, greedy_fast, beam};
}

// decode() on the sentence alone (a batch of one, nothing padded).
std::vector<Hypothesis> alone(nn::EncoderDecoder& net, const Ids& source,
                              const DecodeOptions& options) {
  const auto T = static_cast<std::int64_t>(source.size());
  return decode(net, from_vector(source, {1, T}), from_vector(Ids{T}), kBos, kEos, options)[0];
}

void expect_same(const std::vector<Hypothesis>& a, const std::vector<Hypothesis>& b,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].ids, b[i].ids) << what << ", hypothesis " << i;
    EXPECT_EQ(a[i].eos, b[i].eos) << what << ", hypothesis " << i;
    // The same products summed in the same order: the same bits (NaN for
    // greedy decoding without scores, on both sides).
    if (std::isnan(a[i].log_prob)) {
      EXPECT_TRUE(std::isnan(b[i].log_prob)) << what;
    } else {
      EXPECT_EQ(a[i].log_prob, b[i].log_prob) << what << ", hypothesis " << i;
      EXPECT_EQ(a[i].score, b[i].score) << what << ", hypothesis " << i;
    }
  }
}

// Decodes `sources` (with options[i % 3]) in one DecodingBatch, adding
// sentence i before step join_step[i], removing those in `removed` after
// step remove_step; returns each sentence's hypotheses (none for removed
// ones) and checks the batch's counts as it goes.
std::map<std::size_t, std::vector<Hypothesis>> run_batch(nn::EncoderDecoder& net,
                                                         const std::vector<Ids>& sources,
                                                         const std::vector<int>& join_step,
                                                         const std::set<std::size_t>& removed = {},
                                                         int remove_step = -1,
                                                         DecodingBatch* kept = nullptr) {
  const auto options = option_mix();
  std::optional<DecodingBatch> own;
  if (kept == nullptr) own.emplace(net, kBos, kEos);
  DecodingBatch& batch = kept != nullptr ? *kept : *own;
  std::map<DecodingBatch::Handle, std::size_t> sentence_of;
  std::map<std::size_t, DecodingBatch::Handle> handle_of;
  std::map<std::size_t, std::vector<Hypothesis>> out;
  std::size_t added = 0;
  for (int step = 0; added < sources.size() || batch.sentences() > 0; ++step) {
    for (std::size_t i = 0; i < sources.size(); ++i)
      if (join_step[i] == step) {
        const auto h = batch.add(sources[i], options[i % options.size()]);
        sentence_of[h] = i;
        handle_of[i] = h;
        ++added;
      }
    if (step == remove_step) {
      for (std::size_t i : removed) {
        EXPECT_TRUE(batch.remove(handle_of.at(i))) << i;
      }
    }
    for (auto& d : batch.step()) {
      const std::size_t i = sentence_of.at(d.handle);
      EXPECT_FALSE(removed.count(i) && step >= remove_step) << "removed sentence " << i;
      out[i] = std::move(d.hypotheses);
    }
  }
  EXPECT_EQ(batch.rows(), 0);
  if (kept == nullptr) {
    EXPECT_EQ(batch.cache_bytes(), 0) << "caches kept after the batch ran empty";
  }
  return out;
}

}  // namespace

// The reference is each sentence alone in decode(), in the same scopes: the
// model's weights frozen, the products batch-invariant. Sentences join at
// steps 0 to 6, greedy and beam sentences mixed, some ending at the length
// limit, some early.
TEST(DecodingBatch, EverySentenceGetsTheBitsItGetsAlone) {
  for (std::int64_t hidden : {16, 64}) {
    SCOPED_TRACE(hidden);
    auto net = make_net(hidden, 5);
    PrecisionScope frozen(Precision::f32, net->parameters());
    BatchInvariant invariant;
    const auto sources = make_sources(30, 17);
    std::vector<int> join(sources.size());
    for (std::size_t i = 0; i < join.size(); ++i) join[i] = static_cast<int>((i * 5) % 7);
    const auto got = run_batch(*net, sources, join);
    ASSERT_EQ(got.size(), sources.size());
    const auto options = option_mix();
    std::set<std::size_t> lengths;
    for (std::size_t i = 0; i < sources.size(); ++i) {
      expect_same(got.at(i), alone(*net, sources[i], options[i % options.size()]),
                  fmt::format("sentence {}", i));
      lengths.insert(got.at(i).front().ids.size());
    }
    EXPECT_GE(lengths.size(), 3u) << "hypotheses should end at different steps";
  }
}

// The same sentences in other company: all at once, one at a time, in
// reverse order, with others removed while they decode. Every run gives
// every sentence the same bits; the removed ones give nothing.
TEST(DecodingBatch, ASentencesBitsDoNotDependOnItsBatch) {
  auto net = make_net(64, 9);
  PrecisionScope frozen(Precision::f32, net->parameters());
  const auto sources = make_sources(24, 3);
  const std::size_t n = sources.size();
  const auto together = run_batch(*net, sources, std::vector<int>(n, 0));
  std::vector<int> staggered(n), reversed(n);
  for (std::size_t i = 0; i < n; ++i) {
    staggered[i] = static_cast<int>(i);
    reversed[i] = static_cast<int>(n - i);
  }
  const std::set<std::size_t> removed = {1, 4, 7, 18};
  const auto runs = {run_batch(*net, sources, staggered), run_batch(*net, sources, reversed),
                     run_batch(*net, sources, std::vector<int>(n, 0), removed, 2)};
  int run = 0;
  for (const auto& other : runs) {
    ++run;
    for (std::size_t i = 0; i < n; ++i) {
      if (run == 3 && removed.count(i)) {
        EXPECT_EQ(other.count(i), 0u) << i;
        continue;
      }
      expect_same(together.at(i), other.at(i), fmt::format("run {}, sentence {}", run, i));
    }
  }
}

// A batch that keeps its caches when it runs empty: the next sentences, in
// rows and slots that other sentences wrote before, get the bits they get
// in a fresh batch, and the caches do not grow.
TEST(DecodingBatch, KeptCachesChangeNothing) {
  auto net = make_net(64, 11);
  PrecisionScope frozen(Precision::f32, net->parameters());
  const auto first = make_sources(18, 5), second = make_sources(12, 6);
  DecodingBatch kept(*net, kBos, kEos);
  kept.keep_caches(true);
  const std::vector<int> together(first.size(), 0);
  (void)run_batch(*net, first, together, {}, -1, &kept);
  const std::int64_t bytes = kept.cache_bytes();
  EXPECT_GT(bytes, 0) << "the caches were released";
  std::vector<int> staggered(second.size());
  for (std::size_t i = 0; i < staggered.size(); ++i) staggered[i] = static_cast<int>(i % 4);
  const auto again = run_batch(*net, second, staggered, {}, -1, &kept);
  EXPECT_EQ(kept.cache_bytes(), bytes) << "a smaller batch grew the kept caches";
  const auto fresh = run_batch(*net, second, staggered);
  for (std::size_t i = 0; i < second.size(); ++i)
    expect_same(again.at(i), fresh.at(i), fmt::format("sentence {}", i));
}

// A sentence's rows leave at once when it is removed, queued or decoding.
TEST(DecodingBatch, RemoveFreesTheRows) {
  auto net = make_net(16, 2);
  DecodeOptions beam;
  beam.beam_size = 4;
  DecodingBatch batch(*net, kBos, kEos);
  const auto a = batch.add({5, 6, 7, kEos}, beam);
  const auto b = batch.add({8, 9, kEos}, beam);
  EXPECT_EQ(batch.sentences(), 2);
  EXPECT_EQ(batch.rows(), 2);  // queued: one row each at the first step
  EXPECT_TRUE(batch.remove(b));
  EXPECT_FALSE(batch.remove(b));
  EXPECT_EQ(batch.rows(), 1);
  (void)batch.step();
  EXPECT_GT(batch.cache_bytes(), 0);
  EXPECT_TRUE(batch.remove(a));
  EXPECT_EQ(batch.sentences(), 0);
  EXPECT_EQ(batch.rows(), 0);
  EXPECT_EQ(batch.cache_bytes(), 0);
  EXPECT_TRUE(batch.step().empty());
}

TEST(DecodingBatch, BadModelsSourcesAndOptionsAreClearErrors) {
  auto net = make_net(16, 2);
  auto expect_error = [](auto f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one with '" << part << "'";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  nn::BahdanauConfig bc;
  bc.src_vocab_size = 10;
  bc.tgt_vocab_size = 10;
  nn::BahdanauEncoderDecoder rnn(bc);
  expect_error([&] { DecodingBatch b(rnn, kBos, kEos); }, "decodes Transformers, not a bahdanau");
  expect_error([&] { DecodingBatch b(*net, kBos, 99); }, "must be target ids in [0, 19)");
  DecodingBatch batch(*net, kBos, kEos);
  expect_error([&] { batch.add({}, {}); }, "a source of 0 ids, outside [1, 40]");
  expect_error([&] { batch.add(Ids(41, 3), {}); }, "a source of 41 ids");
  expect_error([&] { batch.add({3, 23}, {}); }, "source id 23 is outside the vocabulary");
  DecodeOptions kept;
  kept.keep_attention = true;
  expect_error([&] { batch.add({3, kEos}, kept); }, "keep_attention is not available");
  DecodeOptions bad;
  bad.beam_size = 0;
  expect_error([&] { batch.add({3, kEos}, bad); }, "beam_size must be at least 1");
  EXPECT_EQ(batch.sentences(), 0);
}
