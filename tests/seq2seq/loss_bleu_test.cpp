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

// sacreBLEU's 13a tokenizer (mteval-v13a), rule by rule.
TEST(Bleu13a, TokenizerRules) {
  // 1: spaces around ASCII symbols but ' - , .; whitespace collapsed.
  EXPECT_EQ(tokenize_13a("Hello, world!"), "Hello , world !");
  EXPECT_EQ(tokenize_13a("  a\t(b)  [c]{d}  "), "a ( b ) [ c ] { d }");
  EXPECT_EQ(tokenize_13a("isn't well-known"), "isn't well-known");
  EXPECT_EQ(tokenize_13a("a/b:c;d@e#f$g%h^i_j`k|l~m+n=o<p>q*r\\s\"t?"),
            "a / b : c ; d @ e # f $ g % h ^ i _ j ` k | l ~ m + n = o < p > q * r \\ s \" t ?");
  // 2 and 3: '.' and ',' split from non-digits, kept between digits.
  EXPECT_EQ(tokenize_13a("It costs $3.50, isn't it?"), "It costs $ 3.50 , isn't it ?");
  EXPECT_EQ(tokenize_13a("3,000.5 fin.Non"), "3,000.5 fin . Non");
  EXPECT_EQ(tokenize_13a("a..b"), "a . . b");
  EXPECT_EQ(tokenize_13a(".5 5."), ". 5 5 .");
  // 4: '-' split from a preceding digit only.
  EXPECT_EQ(tokenize_13a("1-2 a-b 3 -4"), "1 - 2 a-b 3 -4");
  // The language-independent part: entities, <skipped>, line breaks.
  EXPECT_EQ(tokenize_13a("&quot;x&quot; &amp; &lt;y&gt;"), "\" x \" & < y >");
  EXPECT_EQ(tokenize_13a("&amp;quot;"), "& quot ;");  // unescaped once
  EXPECT_EQ(tokenize_13a("a<skipped>b hy-\nphen\nnext"), "ab hyphen next");
  // UTF-8 passes through; Unicode spaces (no-break, narrow no-break) separate words.
  EXPECT_EQ(tokenize_13a("\xC3\x87"
                         "a va\xC2\xA0!"),
            "\xC3\x87"
            "a va !");
  EXPECT_EQ(tokenize_13a("Va\xE2\x80\xAF!\xE3\x80\x80"
                         "fin"),
            "Va ! fin");
  EXPECT_EQ(tokenize_13a("caf\xC3\xA9."), "caf\xC3\xA9 .");
  EXPECT_EQ(tokenize_13a(""), "");
}

// Hand-computed corpus BLEU: n-gram counts by hand in the comments.
TEST(Bleu13a, OneSentenceByHand) {
  // hyp: the cat sat on the mat .    ref: the cat is on the mat .   (7 and 7 words)
  //   1-grams: the x2, cat, on, mat, . match (sat does not)      6/7
  //   2-grams: the cat, on the, the mat, mat . (of 6)             4/6
  //   3-grams: on the mat, the mat . (of 5)                       2/5
  //   4-grams: on the mat . (of 4)                                1/4
  // BP = 1; BLEU = 100 (6/7 * 4/6 * 2/5 * 1/4)^(1/4)
  BleuScore b = corpus_bleu_13a({"the cat sat on the mat."}, {"the cat is on the mat."});
  EXPECT_EQ(b.counts, (std::array<std::int64_t, 4>{6, 4, 2, 1}));
  EXPECT_EQ(b.totals, (std::array<std::int64_t, 4>{7, 6, 5, 4}));
  EXPECT_EQ(b.sys_len, 7);
  EXPECT_EQ(b.ref_len, 7);
  EXPECT_EQ(b.bp, 1.0);
  EXPECT_NEAR(b.precisions[0], 600.0 / 7, 1e-12);
  EXPECT_NEAR(b.score, 100 * std::pow(6.0 / 7 * 4.0 / 6 * 2.0 / 5 * 1.0 / 4, 0.25), 1e-10);
  EXPECT_EQ(format_bleu(b),
            "BLEU = 48.89 85.7/66.7/40.0/25.0 (BP = 1.000 ratio = 1.000 hyp_len = 7 ref_len = 7)");
  // Tokenized alike, the same text scores 100 however it was spaced.
  EXPECT_NEAR(corpus_bleu_13a({"Hello, world!"}, {"Hello , world !"}).score, 100.0, 1e-12);
}

TEST(Bleu13a, CorpusSumsAndBrevityPenalty) {
  // Sentence 1: "a b c" against "a b c d e": 3/3, 2/2, 1/1, 0 of 0 four-grams.
  // Sentence 2: "x y z w" against itself:   4/4, 3/3, 2/2, 1/1.
  // Summed: 7/7, 5/5, 3/3, 1/1; lengths 7 against 9: BP = exp(1 - 9/7).
  BleuScore b = corpus_bleu_13a({"a b c", "x y z w"}, {"a b c d e", "x y z w"});
  EXPECT_EQ(b.counts, (std::array<std::int64_t, 4>{7, 5, 3, 1}));
  EXPECT_EQ(b.totals, (std::array<std::int64_t, 4>{7, 5, 3, 1}));
  EXPECT_NEAR(b.bp, std::exp(1.0 - 9.0 / 7.0), 1e-15);
  EXPECT_NEAR(b.score, 100 * std::exp(1.0 - 9.0 / 7.0), 1e-10);
  // An empty hypothesis: BP 0. Trailing whitespace is not a word.
  EXPECT_EQ(corpus_bleu_13a({" \xC2\xA0"}, {"a b c d"}).bp, 0.0);
  EXPECT_THROW(corpus_bleu_13a({"a"}, {}), ValueError);
}

TEST(Bleu13a, ZeroPrecisionsSmoothedOrNot) {
  // "a b c d" against "a b x d": 1-grams a, b, d of 4; 2-grams "a b" of 3;
  // 3-grams 0 of 2; 4-grams 0 of 1. exp smoothing: the first zero counts as
  // 1 / (2 * 2), the second as 1 / (4 * 1): p = 75, 33.3, 25, 25 (percent),
  // BLEU = (75 * 100/3 * 25 * 25)^(1/4) = 1562500^(1/4) = 25 sqrt(2).
  BleuScore b = corpus_bleu_13a({"a b c d"}, {"a b x d"});
  EXPECT_EQ(b.counts, (std::array<std::int64_t, 4>{3, 1, 0, 0}));
  EXPECT_NEAR(b.precisions[2], 25.0, 1e-12);
  EXPECT_NEAR(b.precisions[3], 25.0, 1e-12);
  EXPECT_NEAR(b.score, 25 * std::sqrt(2.0), 1e-10);
  // Without smoothing a zero precision makes BLEU 0.
  BleuScore none = corpus_bleu_13a({"a b c d"}, {"a b x d"}, BleuSmoothing::none);
  EXPECT_EQ(none.score, 0.0);
  EXPECT_EQ(none.precisions[2], 0.0);
  EXPECT_NEAR(none.precisions[1], 100.0 / 3, 1e-12);
  // Nothing matches at all: 0, every precision 0, smoothing or not.
  BleuScore nothing = corpus_bleu_13a({"p q r s"}, {"a b c d"});
  EXPECT_EQ(nothing.score, 0.0);
  EXPECT_EQ(nothing.precisions, (std::array<double, 4>{}));
  // No hypothesis has four words: no 4-grams at all, so 0 even though all matches.
  EXPECT_EQ(corpus_bleu_13a({"a b"}, {"a b"}).score, 0.0);
}
