// translate_texts (seq2seq/translator.h): batches decoded side by side, each
// on one thread, give the translations of one batch at a time on all threads,
// in f32, bf16 and int8; the threads' scopes, errors and the models that
// decode one batch at a time.
#include "attn/seq2seq/translator.h"

#include <omp.h>

#include <atomic>
#include <memory>
#include <optional>

#include "attn/autograd/node.h"
#include "attn/nn/bahdanau.h"
#include "attn/ops/precision.h"
#include "attn/ops/quantize.h"
#include "testing.h"

using namespace attn;
using namespace attn::seq2seq;

namespace {

struct Corpus {
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::vector<std::string> sentences;
};

// n sentences of 1 to 12 words from a vocabulary of 40, one of them empty.
Corpus make_corpus(int n) {
  data::Tokens words;
  for (int i = 0; i < 40; ++i) words.push_back(fmt::format("w{}", i));
  Corpus c;
  c.tokenizer = data::word_tokenizer(data::Vocab({words}, 1, data::kReservedTokens),
                                     data::Vocab({words}, 1, data::kReservedTokens));
  for (int i = 0; i < n; ++i) {
    std::string s;
    const int len = 1 + (i * 7) % 12;
    for (int k = 0; k < len; ++k) {
      if (k > 0) s += ' ';
      s.append(words[static_cast<std::size_t>((i * 13 + k * 5) % 40)]);
    }
    c.sentences.push_back(s);
  }
  c.sentences[5] = "";
  return c;
}

// A model that counts the encodings it ran (begin(): a batch decoded by
// decode(); encode_sources: a group of sources of one length joining a
// DecodingBatch), and those inside a team of threads (decoded side by side),
// and throws from the third of those when asked.
template <class Model>
struct Watched : Model {
  using Model::Model;
  std::atomic<int> in_team{0}, calls{0};
  bool fail = false;
  void count() {
    ++calls;
    if (omp_in_parallel() && ++in_team == 3 && fail)
      throw ValueError(fmt::format("batch failed on thread {}", omp_get_thread_num()));
  }
  nn::DecoderState begin(const Tensor& enc_X, const Tensor& enc_valid_lens) override {
    count();
    return Model::begin(enc_X, enc_valid_lens);
  }
};
template <>
struct Watched<nn::EncoderDecoder> : nn::EncoderDecoder {
  using nn::EncoderDecoder::EncoderDecoder;
  std::atomic<int> in_team{0}, calls{0};
  bool fail = false;
  void count() {
    ++calls;
    if (omp_in_parallel() && ++in_team == 3 && fail)
      throw ValueError(fmt::format("batch failed on thread {}", omp_get_thread_num()));
  }
  nn::DecoderState begin(const Tensor& enc_X, const Tensor& enc_valid_lens) override {
    count();
    return nn::EncoderDecoder::begin(enc_X, enc_valid_lens);
  }
  void encode_sources(const Tensor& src, const std::vector<std::int64_t>& slots,
                      nn::SlotCache& cache) override {
    count();
    nn::EncoderDecoder::encode_sources(src, slots, cache);
  }
};

// A random Transformer large enough for the packed and int8 products (weights
// of 2^14 elements and more), its output layer sharpened and its <eos> logit
// lowered so that translations end at different lengths.
template <class Model = nn::EncoderDecoder>
std::shared_ptr<Model> make_transformer(const data::Tokenizer& tok) {
  nn::TransformerConfig c;
  c.src_vocab_size = tok.vocab(data::Side::source).size();
  c.tgt_vocab_size = tok.vocab(data::Side::target).size();
  c.num_hiddens = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.ffn_num_hiddens = 256;
  c.dropout = 0.0;
  c.max_len = 64;
  manual_seed(11);
  auto net = std::make_shared<Model>(c);
  autograd::NoGradGuard no_grad;
  copy_(net->decoder->dense->weight, mul(net->decoder->dense->weight, 4.0));
  net->decoder->dense->bias.template data<float>()[tok.vocab(data::Side::target)["<eos>"]] -= 3.0f;
  net->eval();
  return net;
}

void expect_same(const std::vector<std::vector<TextTranslation>>& a,
                 const std::vector<std::vector<TextTranslation>>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  std::size_t lengths = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << what << ", sentence " << i;
    for (std::size_t j = 0; j < a[i].size(); ++j) {
      EXPECT_EQ(a[i][j].ids, b[i][j].ids) << what << ", sentence " << i << ", hypothesis " << j;
      EXPECT_EQ(a[i][j].text, b[i][j].text) << what << ", sentence " << i;
      // The same products summed in the same order: the same bits.
      EXPECT_EQ(a[i][j].log_prob, b[i][j].log_prob) << what << ", sentence " << i;
      EXPECT_EQ(a[i][j].score, b[i][j].score) << what << ", sentence " << i;
      EXPECT_EQ(a[i][j].eos, b[i][j].eos) << what << ", sentence " << i;
    }
    lengths += a[i].front().ids.size();
  }
  EXPECT_GT(lengths, a.size()) << what << ": every translation empty";
}

// f() throws a ValueError whose message contains `part`.
template <class F>
void expect_value_error(F f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one with '" << part << "'";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

enum class Variant { f32, bf16, int8 };

// The calling thread's scopes for a variant, as `attn translate` opens them:
// the parameters frozen (a product's rows are then summed alone whatever the
// batch: BatchInvariant, ops/precision.h), and quantized for int8.
struct Scopes {
  PrecisionScope precision;
  std::optional<QuantizeScope> quantize;
  Scopes(Variant v, const std::vector<Tensor>& params)
      : precision(v == Variant::bf16 ? Precision::bf16 : Precision::f32, params) {
    if (v == Variant::int8) quantize.emplace(params);
  }
};

// Greedy, or beam search keeping its 2 best with a length penalty.
DecodeOptions search_options(std::int64_t beam) {
  DecodeOptions options;
  options.beam_size = beam;
  options.n_best = beam == 1 ? 1 : 2;
  options.length_penalty = beam == 1 ? 0.0 : 0.6;
  return options;
}

// Batches of 32 (the encoder's products then run on two threads when one
// batch is decoded at a time, on one each side by side) and a last batch of
// 12 sentences, decoded first side by side (the longest), where a product of
// fewer than 16 rows on a thread that has packed nothing yet would take the
// unpacked path without the PackAllRows guard (attn/ops/precision.h).
TEST(TranslateTexts, BatchesSideBySideGiveTheTranslationsOfOneAtATime) {
  const Corpus c = make_corpus(140);
  auto net = make_transformer(*c.tokenizer);
  const std::vector<Tensor> params = net->parameters();
  for (Variant v : {Variant::f32, Variant::bf16, Variant::int8}) {
    if (v == Variant::bf16 && !bf16_supported()) continue;  // the scope refuses it
    if (v == Variant::int8 && !int8_supported()) continue;
    const Scopes scopes(v, params);
    for (std::int64_t beam : {1, 3}) {
      const DecodeOptions options = search_options(beam);
      BatchOptions one;
      one.batch_size = 32;
      one.workers = 1;
      const auto serial = translate_texts(*net, *c.tokenizer, c.sentences, options, one);
      BatchOptions two = one;
      two.workers = 2;
      // The second thread joins the caller's scopes: without them it would
      // decode in f32 and its batches' bits would differ.
      const auto parallel = translate_texts(*net, *c.tokenizer, c.sentences, options, two);
      expect_same(serial, parallel, fmt::format("variant {}, beam {}", static_cast<int>(v), beam));
    }
  }
}

// Each thread keeps its DecodingBatch, and so its caches, from batch to
// batch: a batch then decodes in cache rows and source slots that earlier
// batches of shorter (one at a time) or longer (side by side, the longest
// first) sentences wrote, and every sentence must still get the translation
// it gets alone, in a batch of its own with fresh caches.
TEST(TranslateTexts, KeptCachesGiveEachSentenceItsTranslationAlone) {
  const Corpus c = make_corpus(30);
  auto net = make_transformer(*c.tokenizer);
  const std::vector<Tensor> params = net->parameters();
  for (Variant v : {Variant::f32, Variant::int8}) {
    if (v == Variant::int8 && !int8_supported()) continue;
    const Scopes scopes(v, params);
    for (std::int64_t beam : {1, 3}) {
      const DecodeOptions options = search_options(beam);
      BatchOptions alone;
      alone.workers = 1;
      std::vector<std::vector<TextTranslation>> each;
      {
        PackAllRows pack;  // as in a run of several batches
        for (const std::string& s : c.sentences)
          each.push_back(translate_texts(*net, *c.tokenizer, {s}, options, alone).front());
      }
      for (int workers : {1, 2}) {
        BatchOptions five;
        five.batch_size = 5;
        five.workers = workers;
        expect_same(
            translate_texts(*net, *c.tokenizer, c.sentences, options, five), each,
            fmt::format("variant {}, beam {}, {} worker(s)", static_cast<int>(v), beam, workers));
      }
    }
  }
}

// Models that record what they attend to in their modules decode one batch
// at a time, as does a single batch.
TEST(TranslateTexts, OneBatchAtATimeWhereSideBySideIsNotSafe) {
  const Corpus c = make_corpus(40);
  BatchOptions b;
  b.batch_size = 8;
  b.workers = 2;
  // The Bahdanau model records its attention weights in its modules.
  nn::BahdanauConfig bc;
  bc.src_vocab_size = c.tokenizer->vocab(data::Side::source).size();
  bc.tgt_vocab_size = c.tokenizer->vocab(data::Side::target).size();
  bc.dropout = 0;
  manual_seed(3);
  Watched<nn::BahdanauEncoderDecoder> bahdanau(bc);
  EXPECT_FALSE(bahdanau.concurrent_decoding());
  DecodeOptions options;
  options.beam_size = 2;
  BatchOptions serial = b;
  serial.workers = 1;
  expect_same(translate_texts(bahdanau, *c.tokenizer, c.sentences, options, serial),
              translate_texts(bahdanau, *c.tokenizer, c.sentences, options, b), "bahdanau");
  EXPECT_EQ(bahdanau.in_team.load(), 0);
  // Kept attention weights are written into the modules too.
  auto net = make_transformer<Watched<nn::EncoderDecoder>>(*c.tokenizer);
  options.keep_attention = true;
  const auto kept = translate_texts(*net, *c.tokenizer, c.sentences, options, b);
  EXPECT_EQ(net->in_team.load(), 0);
  ASSERT_FALSE(kept[0].empty());
  // One batch: nothing to run beside it.
  options.keep_attention = false;
  b.batch_size = 1000;
  (void)translate_texts(*net, *c.tokenizer, c.sentences, options, b);
  EXPECT_EQ(net->in_team.load(), 0);
  // Five batches: side by side, every encoding of them on the team (at
  // least one per batch: a DecodingBatch encodes its sources by length).
  b.batch_size = 8;
  net->calls = 0;
  (void)translate_texts(*net, *c.tokenizer, c.sentences, options, b);
  EXPECT_GE(net->in_team.load(), 5);
  EXPECT_EQ(net->in_team.load(), net->calls.load());
}

TEST(TranslateTexts, AThreadsErrorIsRethrownAndBadOptionsRefused) {
  const Corpus c = make_corpus(60);
  auto net = make_transformer<Watched<nn::EncoderDecoder>>(*c.tokenizer);
  BatchOptions b;
  b.batch_size = 4;
  b.workers = 1;
  (void)translate_texts(*net, *c.tokenizer, c.sentences, {}, b);
  const int all = net->calls.load();  // the encodings of all 15 batches
  net->fail = true;
  b.workers = 2;
  try {
    (void)translate_texts(*net, *c.tokenizer, c.sentences, {}, b);
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("batch failed on thread"), std::string::npos) << e.what();
  }
  // The other thread stopped at its next batch: not all 15 began.
  EXPECT_LT(net->in_team.load(), all);
  b.workers = -1;
  expect_value_error([&] { (void)translate_texts(*net, *c.tokenizer, c.sentences, {}, b); },
                     "workers must be 0 (one per thread) or more, got -1");
}

// batch_size 0: 32 sentences in f32; 64 rows in bf16 or int8.
TEST(TranslateTexts, AutomaticBatchSize) {
  for (std::int64_t beam : {1, 4, 64}) EXPECT_EQ(automatic_batch_size(beam), 32u) << beam;
  const std::vector<std::pair<std::int64_t, std::size_t>> reduced = {
      {1, 32}, {2, 32}, {3, 21}, {4, 16}, {8, 8}, {64, 1}, {100, 1}};
  if (bf16_supported()) {
    PrecisionScope bf16(Precision::bf16, {});
    for (const auto& [beam, n] : reduced) EXPECT_EQ(automatic_batch_size(beam), n) << beam;
  }
  if (int8_supported()) {
    QuantizeScope int8(std::vector<Tensor>{});
    for (const auto& [beam, n] : reduced) EXPECT_EQ(automatic_batch_size(beam), n) << beam;
  }
  EXPECT_EQ(automatic_batch_size(4), 32u);  // the scopes ended
}

}  // namespace

// BatchOptions::before_batch runs before every batch, on the thread that
// decodes it; what it throws ends translate_texts and is rethrown, one batch
// at a time or side by side (the Python module stops a translation on
// Ctrl-C so).
TEST(TranslateTexts, BeforeBatchIsCalledForEveryBatchAndMayStopTheTranslation) {
  const Corpus c = make_corpus(40);
  auto net = make_transformer(*c.tokenizer);
  for (int workers : {1, 2}) {
    BatchOptions b;
    b.batch_size = 4;
    b.workers = workers;
    std::atomic<int> calls{0};
    b.before_batch = [&calls] { ++calls; };
    const auto all = translate_texts(*net, *c.tokenizer, c.sentences, {}, b);
    EXPECT_EQ(calls.load(), 10) << workers;  // 39 sentences with words, 4 a batch
    calls = 0;
    b.before_batch = [&calls] {
      if (++calls == 3) throw ValueError("stop here");
    };
    expect_value_error([&] { (void)translate_texts(*net, *c.tokenizer, c.sentences, {}, b); },
                       "stop here");
    EXPECT_LT(calls.load(), 10) << workers;
  }
}
