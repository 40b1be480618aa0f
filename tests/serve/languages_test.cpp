// The language pair of a model and the detector's honest confidence
// (src/serve/languages.h), on a word tokenizer whose vocabulary both
// "languages" share, as a SentencePiece model shares both sides.
#include "serve/languages.h"

#include "attn/serve/server.h"
#include "testing.h"

using namespace attn;
using namespace attn::serve;

TEST(Languages, PairsAndNames) {
  EXPECT_EQ(parse_language_pair("en-fr"), std::make_pair(std::string("en"), std::string("fr")));
  for (const char* bad : {"en", "en-", "-fr", "en-en", "EN-fr", "eng-fr", "en_fr", "en-fr-de"})
    EXPECT_THROW(parse_language_pair(bad), ValueError) << bad;
  EXPECT_EQ(language_name("fr"), "French");
  EXPECT_EQ(language_name("xx"), "xx");
}

TEST(Languages, DetectorConfidence) {
  // Two "languages" over one shared vocabulary: words a* and b*, "shared"
  // common to both.
  data::Tokens words = {"a1", "a2", "a3", "b1", "b2", "b3", "shared", "c1"};
  auto tok = std::shared_ptr<const data::Tokenizer>(
      data::word_tokenizer(data::Vocab({words}, 1, data::kReservedTokens),
                           data::Vocab({words}, 1, data::kReservedTokens)));
  std::vector<std::string> as, bs;
  for (int i = 0; i < 50; ++i) {
    as.push_back(i % 2 ? "a1 a2 shared a3" : "a3 a1 a2");
    bs.push_back(i % 2 ? "b1 b2 shared b3" : "b2 b3 b1");
  }
  LanguageDetector d;
  d.add("aa", tok, data::Side::source, as);
  d.add("bb", tok, data::Side::target, bs);
  const auto a = d.detect("a2 a1 a3 a1");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].language, "aa");
  EXPECT_GT(a[0].confidence, 90);
  EXPECT_LT(a[1].confidence, 10);
  EXPECT_EQ(d.detect("b3 b1")[0].language, "bb");
  // A word both have: about even, low confidence.
  const auto even = d.detect("shared");
  EXPECT_NEAR(even[0].confidence, even[1].confidence, 1.0);
  EXPECT_LT(even[0].confidence, 60);
  // Words neither language uses (another language): no confidence to speak of.
  EXPECT_LT(d.detect("c1 c1 c1 c1")[0].confidence, 20);
  // An empty text: nothing to go by.
  EXPECT_LT(d.detect("")[0].confidence, 60);
  EXPECT_TRUE(LanguageDetector().detect("a1").empty());
}
