// Tokenizers (data/tokenizer.h) and token batches (data/batching.h).
#include "attn/data/tokenizer.h"

#include <set>

#include "attn/data/batching.h"
#include "attn/data/corpus.h"
#include "attn/data/nmt.h"
#include "testing.h"

using namespace attn;
using namespace attn::data;

namespace {
// A small English-French corpus, repeated with variations so SentencePiece
// has something to learn.
std::vector<SentencePair> corpus() {
  std::vector<SentencePair> pairs;
  const std::vector<std::pair<std::string, std::string>> base = {
      {"I'm home.", "Je suis chez moi."},
      {"He's calm.", "Il est calme."},
      {"I lost.", "J'ai perdu."},
      {"Go now.", "Va, maintenant."},
      {"We won.", "Nous avons gagné."},
      {"Help me!", "Aide-moi !"},
      {"She is tired.", "Elle est fatiguée."},
      {"It's raining.", "Il pleut."}};
  for (int i = 0; i < 40; ++i)
    for (const auto& [s, t] : base)
      pairs.push_back({s + (i % 2 ? "" : " Really."), t + (i % 2 ? "" : " Vraiment.")});
  return pairs;
}
}  // namespace

TEST(SentencePiece, TrainedModelRoundTripsAndDetokenizes) {
  std::vector<std::string> sentences;
  for (const auto& p : corpus()) {
    sentences.push_back(p.source);
    sentences.push_back(p.target);
  }
  const std::string model = train_sentencepiece(sentences, {60, "unigram"}, 3);
  EXPECT_EQ(model, train_sentencepiece(sentences, {60, "unigram"}, 3));  // deterministic
  auto tok = sentencepiece_tokenizer(model, "'spm.model'");
  EXPECT_EQ(tok->kind(), "spm");
  const Vocab& v = tok->vocab(Side::target);
  EXPECT_EQ(v.size(), 60u);
  EXPECT_EQ(v.token(0), "<unk>");
  EXPECT_EQ(v.token(1), "<pad>");
  EXPECT_EQ(v.token(2), "<bos>");
  EXPECT_EQ(v.token(3), "<eos>");
  for (const std::string s :
       {"Je suis chez moi.", "Il est calme.", "Aide-moi !", "Nous avons gagné."}) {
    auto ids = tok->encode(s, Side::target);
    EXPECT_FALSE(ids.empty());
    for (auto id : ids) EXPECT_GE(id, 4);  // no reserved id inside text
    EXPECT_EQ(tok->decode(ids, Side::target), s);  // cased, detokenized
  }
  // BPE too.
  auto bpe = sentencepiece_tokenizer(train_sentencepiece(sentences, {60, "bpe"}, 3), "'b'");
  EXPECT_EQ(bpe->decode(bpe->encode("Il pleut.", Side::target), Side::target), "Il pleut.");
  // Too many pieces for the text: SentencePiece's reason, one line.
  try {
    train_sentencepiece(sentences, {100000, "unigram"}, 3);
    ADD_FAILURE();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Vocabulary size too high (100000)"), std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  EXPECT_THROW(sentencepiece_tokenizer("not a model", "'m'"), IOError);
}

TEST(WordTokenizer, IsD2lsPipeline) {
  std::vector<Tokens> src = {{"go", "."}, {"i", "lost", "."}}, tgt = {{"va", "!"}};
  auto tok = word_tokenizer(Vocab(src, 1, kReservedTokens), Vocab(tgt, 1, kReservedTokens));
  auto ids = tok->encode("Go.", Side::source);
  EXPECT_EQ(tok->vocab(Side::source).to_tokens(ids), (Tokens{"go", "."}));
  EXPECT_EQ(tok->decode(tok->encode("Va!", Side::target), Side::target), "va !");
}

// Token batches: every pair exactly once, within the token budget, lengths
// alike within a batch, the same batches in every epoch.
TEST(TokenBatches, CoverEveryPairOncePerEpoch) {
  TokenizedPairs pairs;
  Generator gen(5);
  for (int i = 0; i < 997; ++i) {
    const int ls = 1 + static_cast<int>(philox_uniform(1, 0, 2 * i) * 30);
    const int lt = 1 + static_cast<int>(philox_uniform(1, 0, 2 * i + 1) * 30);
    pairs.src.push_back(std::vector<std::int64_t>(static_cast<std::size_t>(ls), 7));
    pairs.tgt.push_back(std::vector<std::int64_t>(static_cast<std::size_t>(lt), 8));
  }
  const std::int64_t budget = 256;
  const auto batches = token_batches(pairs, budget, 11);
  std::vector<int> seen(pairs.size(), 0);
  for (const auto& b : batches) {
    std::int64_t longest = 0;
    for (auto i : b) {
      ++seen[static_cast<std::size_t>(i)];
      longest = std::max<std::int64_t>(
          longest,
          static_cast<std::int64_t>(std::max(pairs.src[i].size(), pairs.tgt[i].size())) + 1);
    }
    EXPECT_TRUE(b.size() == 1 || longest * static_cast<std::int64_t>(b.size()) <= budget);
    const PairBatch t = make_batch(pairs, b, 1, 3);
    EXPECT_EQ(t.src.size(0), static_cast<std::int64_t>(b.size()));
    EXPECT_LE(t.tgt.size(1), 32);
  }
  for (int s : seen) EXPECT_EQ(s, 1);
  EXPECT_EQ(token_batches(pairs, budget, 11), batches);
  // An epoch's order is a permutation of the batches.
  Generator shuffle(3);
  auto order = epoch_order(static_cast<std::int64_t>(batches.size()), shuffle);
  std::set<std::int64_t> distinct(order.begin(), order.end());
  EXPECT_EQ(distinct.size(), batches.size());
  // make_batch: <eos> after each sentence, <pad> after it.
  TokenizedPairs two;
  two.src = {{5, 6}, {7}};
  two.tgt = {{9}, {10, 11, 12}};
  PairBatch b = make_batch(two, {0, 1}, 1, 3);
  EXPECT_EQ(to_vector<std::int64_t>(b.src), (std::vector<std::int64_t>{5, 6, 3, 7, 3, 1}));
  EXPECT_EQ(to_vector<std::int64_t>(b.tgt_len), (std::vector<std::int64_t>{2, 4}));
}

TEST(TokenizePairs, DropsAndCountsTooLongPairs) {
  std::vector<Tokens> v = {{"a", "b", "c", "d"}};
  auto tok = word_tokenizer(Vocab(v, 1, kReservedTokens), Vocab(v, 1, kReservedTokens));
  std::size_t dropped = 0;
  auto t = tokenize_pairs({{"a b", "c"}, {"a b c d", "a"}, {"a", "a b c"}}, *tok, 4, &dropped);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(dropped, 1u);
}
