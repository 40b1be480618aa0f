// Sentence pairs as written and the held-out split (data/corpus.h).
#include "attn/data/corpus.h"

#include <set>

#include "testing.h"

using namespace attn;
using namespace attn::data;

namespace {
std::vector<SentencePair> many_pairs(int sources, int translations_each) {
  std::vector<SentencePair> p;
  for (int t = 0; t < translations_each; ++t)
    for (int s = 0; s < sources; ++s)
      p.push_back({fmt::format("Sentence {}.", s), fmt::format("Phrase {} v{}.", s, t)});
  return p;
}
}  // namespace

TEST(Corpus, ParsePairsKeepsTheTextAsWritten) {
  auto p = parse_pairs("Go.\tVa !\tCC-BY 2.0\n\nI'm home.\tJe suis chez moi.\r\n", "'c'");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].source, "Go.");
  EXPECT_EQ(p[0].target, "Va !");
  EXPECT_EQ(p[1].target, "Je suis chez moi.");
  EXPECT_EQ(parse_pairs("a\tb\nc\td\ne\tf\n", "'c'", 2).size(), 2u);
  EXPECT_THROW(parse_pairs("no tab\n", "'c'"), IOError);
  EXPECT_THROW(parse_pairs("\tonly target\n", "'c'"), IOError);
  EXPECT_THROW(parse_pairs("\n\n", "'c'"), IOError);
  EXPECT_THROW(parse_pairs("a\tb\xff\n", "'c'"), IOError);
}

TEST(Corpus, SourceKeyFoldsWhiteSpaceOnly) {
  EXPECT_EQ(source_key("  I'm   home. "), "I'm home.");
  EXPECT_NE(source_key("Go."), source_key("go."));
}

// No source sentence of valid or test appears in train, every pair lands in
// exactly one part, the sizes are met, and the split depends on the seed only.
TEST(Corpus, SplitBySourceHasNoLeakage) {
  const auto pairs = many_pairs(500, 3);  // 500 sources, 3 translations each
  const Split a = split_by_source(pairs, 100, 60, 7);
  EXPECT_EQ(a.train.size() + a.valid.size() + a.test.size(), pairs.size());
  EXPECT_GE(a.valid.size(), 100u);
  EXPECT_LT(a.valid.size(), 103u);  // at most one group past the size
  EXPECT_GE(a.test.size(), 60u);
  EXPECT_LT(a.test.size(), 63u);
  std::set<std::string> train_sources;
  for (const auto& p : a.train) train_sources.insert(source_key(p.source));
  for (const auto* part : {&a.valid, &a.test})
    for (const auto& p : *part)
      EXPECT_EQ(train_sources.count(source_key(p.source)), 0u) << p.source;
  std::set<std::string> valid_sources;
  for (const auto& p : a.valid) valid_sources.insert(p.source);
  for (const auto& p : a.test) EXPECT_EQ(valid_sources.count(p.source), 0u);
  // Deterministic from the seed; another seed, another sample.
  const Split b = split_by_source(pairs, 100, 60, 7), c = split_by_source(pairs, 100, 60, 8);
  EXPECT_EQ(pairs_to_tsv(a.test), pairs_to_tsv(b.test));
  EXPECT_NE(pairs_to_tsv(a.test), pairs_to_tsv(c.test));
  // Random, not the tail: the test part draws from the whole corpus.
  std::set<std::string> test_sources;
  for (const auto& p : a.test) test_sources.insert(p.source);
  int early = 0;
  for (int s = 0; s < 250; ++s) early += test_sources.count(fmt::format("Sentence {}.", s)) > 0;
  EXPECT_GT(early, 3);
  EXPECT_LT(early, 17);
  // Nothing left to train on.
  EXPECT_THROW(split_by_source(many_pairs(5, 1), 3, 3, 1), ValueError);
  // The TSV reads back.
  EXPECT_EQ(pairs_to_tsv(parse_pairs(pairs_to_tsv(a.valid), "'v'")), pairs_to_tsv(a.valid));
}
