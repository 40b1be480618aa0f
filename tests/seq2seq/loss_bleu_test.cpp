#include "attn/seq2seq/bleu.h"
#include "attn/seq2seq/loss.h"
#include "testing.h"

using namespace attn;
using namespace attn::seq2seq;

// d2l 9.7 prints tensor([2.3026, 1.1513, 0.0000]).
TEST(MaskedCELoss, GoldenValuesOfTheChapter) {
  Tensor pred = ones({3, 4, 10});
  Tensor label = ones({3, 4}, DType::i64);
  Tensor valid = from_vector(std::vector<std::int64_t>{4, 2, 0});
  auto l = to_vector<float>(masked_ce_loss(pred, label, valid));
  EXPECT_NEAR(l[0], 2.3026, 5e-5);
  EXPECT_NEAR(l[1], 1.1513, 5e-5);
  EXPECT_EQ(l[2], 0.0f);
  EXPECT_THROW(masked_ce_loss(pred, ones({3, 5}, DType::i64), valid), ShapeError);
}

TEST(MaskedCELoss, Gradcheck) {
  Tensor pred = attn::testing::leaf64({2, 3, 5}, 1);
  Tensor label = from_vector(std::vector<std::int64_t>{0, 4, 2, 1, 1, 3}, {2, 3});
  Tensor valid = from_vector(std::vector<std::int64_t>{3, 1});
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& v) { return masked_ce_loss(v[0], label, valid); },
                   {pred});
}

TEST(Bleu, D2lFormula) {
  EXPECT_DOUBLE_EQ(bleu("va !", "va !", 2), 1.0);
  EXPECT_DOUBLE_EQ(bleu("il est calme .", "il est calme .", 2), 1.0);
  // pred "j'ai perdu ." vs label "j'ai perdu ." with k=2 is 1; one wrong word:
  // p1 = 2/3, p2 = 1/2 -> (2/3)^(1/2) * (1/2)^(1/4)
  EXPECT_NEAR(bleu("j'ai perdu !", "j'ai perdu .", 2), std::sqrt(2.0 / 3) * std::pow(0.5, 0.25),
              1e-12);
  // A one-token prediction: d2l divides by zero for n = 2; we count 0.
  EXPECT_EQ(bleu("va", "va !", 2), 0.0);
  // Brevity penalty: exp(1 - 4/2).
  EXPECT_NEAR(bleu("a b", "a b c d", 1), std::exp(1.0 - 2.0), 1e-12);
}

TEST(Bleu, CorpusBleu4) {
  std::vector<data::Tokens> pred = {{"the", "cat", "is", "on", "the", "mat"}};
  EXPECT_DOUBLE_EQ(corpus_bleu(pred, pred), 1.0);
  std::vector<data::Tokens> ref = {{"the", "cat", "sat", "on", "the", "mat"}};
  // p1 = 5/6, p2 = 3/5, p3 = 1/4, p4 = 0/3 -> 0
  EXPECT_EQ(corpus_bleu(pred, ref), 0.0);
  std::vector<data::Tokens> p2 = {{"a", "b", "c", "d", "e"}}, r2 = {{"a", "b", "c", "d", "x"}};
  // p = 4/5, 3/4, 2/3, 1/2; bp = 1
  EXPECT_NEAR(corpus_bleu(p2, r2), std::pow(0.8 * 0.75 * (2.0 / 3) * 0.5, 0.25), 1e-12);
  EXPECT_THROW(corpus_bleu(p2, {}), ValueError);
}
