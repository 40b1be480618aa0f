#include "attn/data/nmt.h"

#include <cstdio>
#include <fstream>

#include "testing.h"

using namespace attn;
using namespace attn::data;

namespace {
const std::string kCorpus = std::string(ATTN_SOURCE_DIR) + "/datasets/fra-eng/fra.txt.gz";

std::string write_temp(const std::string& name, const std::string& bytes) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}
}  // namespace

TEST(Preprocess, MatchesD2l) {
  EXPECT_EQ(preprocess_nmt("Go.\tVa !"), "go .\tva !");
  EXPECT_EQ(preprocess_nmt("Run!\tCours\xE2\x80\xAF!"), "run !\tcours !");
  EXPECT_EQ(preprocess_nmt("\xC3\x80 l'aide\xC2\xA0!"), "\xC3\xA0 l'aide !");  // À -> à
  EXPECT_EQ(preprocess_nmt("I'm home.  Yes,no?"), "i'm home .  yes ,no ?");
  EXPECT_EQ(split_spaces("a  b"), (std::vector<std::string>{"a", "", "b"}));
}

TEST(Tokenize, ReadsNumExamplesPlusOneLines) {
  auto c = tokenize_nmt("go .\tva !\nhi .\tsalut !\nrun !\tcours !\n", 1, "test");
  ASSERT_EQ(c.source.size(), 2u);
  EXPECT_EQ(c.source[1], (Tokens{"hi", "."}));
  EXPECT_EQ(c.target[0], (Tokens{"va", "!"}));
  EXPECT_THROW(tokenize_nmt("go .\tva !\nno tab here\n", 0, "test"), IOError);
  try {
    tokenize_nmt("go .\tva !\nno tab here\n", 0, "'corpus.txt'");
    FAIL();
  } catch (const IOError& e) {
    EXPECT_STREQ(e.what(), "'corpus.txt' line 2: no tab between source and target: 'no tab here'");
  }
}

TEST(Vocab, OrderAndUnknown) {
  Vocab v({{"b", "a", "b"}, {"c", "a", "d"}}, 1, kReservedTokens);
  // <unk> <pad> <bos> <eos>, then by frequency, ties in first-seen order.
  EXPECT_EQ(v.tokens(),
            (std::vector<std::string>{"<unk>", "<pad>", "<bos>", "<eos>", "b", "a", "c", "d"}));
  EXPECT_EQ(v["zzz"], 0);
  EXPECT_EQ(v["<eos>"], 3);
  Vocab v2({{"b", "a", "b"}, {"c", "a", "d"}}, 2, kReservedTokens);
  EXPECT_EQ(v2.size(), 6u);
}

TEST(Vocab, SaveLoadRoundTripAndBadFiles) {
  Vocab v({{"x", "y", "", "x"}}, 1, kReservedTokens);
  std::string path = ::testing::TempDir() + "vocab_rt.txt";
  v.save(path);
  Vocab w = Vocab::load(path);
  EXPECT_EQ(w.tokens(), v.tokens());
  EXPECT_THROW(Vocab::load(write_temp("v_empty.txt", "")), IOError);
  EXPECT_THROW(Vocab::load(write_temp("v_nounk.txt", "a\nb\n")), IOError);
  EXPECT_THROW(Vocab::load(write_temp("v_dup.txt", "<unk>\na\na\n")), IOError);
  EXPECT_THROW(Vocab::load(write_temp("v_trunc.txt", "<unk>\na")), IOError);
  EXPECT_THROW(Vocab::load(write_temp("v_utf8.txt", "<unk>\n\xC3\x28\n")), IOError);
  EXPECT_THROW(Vocab::load("/nonexistent/vocab.txt"), IOError);
}

// d2l's build_array_nmt counts the ids that are not <pad>, so the word "<pad>"
// in a corpus is the pad id and does not count: "go <pad>" + <eos> has valid
// length 2, and "<pad>" cut to one step has valid length 0.
TEST(Nmt, ThePadWordIsThePadIdAsInD2l) {
  Vocab v({{"go", "<pad>"}}, 1, kReservedTokens);
  EXPECT_EQ(v["<pad>"], 1);
  TokenArray a = build_array_nmt({{"go", "<pad>"}, {"<pad>"}}, v, 4);
  EXPECT_EQ(a.array.at({0, 1}), 1.0);
  EXPECT_EQ(a.valid_len.at({0}), 2.0);
  EXPECT_EQ(a.valid_len.at({1}), 1.0);  // <pad> <eos> <pad> <pad>
  TokenArray one = build_array_nmt({{"<pad>"}}, v, 1);
  EXPECT_EQ(one.valid_len.at({0}), 0.0);
}

TEST(Nmt, D2lPresetVocabularySizes) {
  NmtData d = load_data_nmt(kCorpus, {});
  EXPECT_EQ(d.src_vocab.size(), 184u);
  EXPECT_EQ(d.tgt_vocab.size(), 201u);
  EXPECT_EQ(d.src.array.shape(), (Shape{601, 10}));
  // d2l prints the first batch's rows like: go . <eos> <pad> ... valid length 3.
  EXPECT_EQ(d.src.valid_len.at({0}), 3.0);
  EXPECT_EQ(d.src_vocab.token(static_cast<std::int64_t>(d.src.array.at({0, 0}))), "go");
  EXPECT_EQ(d.src.array.at({0, 2}), 3.0);  // <eos>
  EXPECT_EQ(d.src.array.at({0, 3}), 1.0);  // <pad>
}

TEST(Nmt, WholeCorpusSourceVocabularyIs10012) {
  NmtOptions o;
  o.num_examples = 0;
  NmtData d = load_data_nmt(kCorpus, o);
  EXPECT_EQ(d.src.array.size(0), 167130);
  EXPECT_EQ(d.src_vocab.size(), 10012u);
  EXPECT_EQ(d.tgt_vocab.size(), 17851u);
}

namespace {
std::string corpus_error(const std::string& path, const NmtOptions& o = {}) {
  try {
    load_data_nmt(path, o);
  } catch (const IOError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(Nmt, BadCorporaAreClearErrors) {
  EXPECT_EQ(corpus_error("/nonexistent/fra.txt"),
            "cannot open '/nonexistent/fra.txt': No such file or directory");
  std::string p = write_temp("c_empty.txt", "");
  EXPECT_EQ(corpus_error(p), "'" + p + "' is empty");
  p = write_temp("c_notab.txt", "go .\tva !\nhello\n");
  EXPECT_EQ(corpus_error(p), "'" + p + "' line 2: no tab between source and target: 'hello'");
  p = write_temp("c_utf8.txt", "go.\tva \xFF!\n");
  EXPECT_EQ(corpus_error(p), "'" + p + "' line 1: invalid UTF-8 at byte 8 of the line (0xFF)");
  p = write_temp("c_blank.txt", "\n\n");
  EXPECT_EQ(corpus_error(p), "'" + p + "' holds no sentence pairs");
  p = write_temp("c_huge.txt", "go .\tva !\n" + std::string(kMaxLineBytes + 10, 'x') + "\tx\n");
  EXPECT_EQ(corpus_error(p), "'" + p +
                                 "' line 2: 65548 bytes long, more than the limit of 65536 "
                                 "bytes per line");
  // Only the lines d2l reads are checked: a bad line after them is not read.
  p = write_temp("c_late.txt", "go .\tva !\nhi .\tsalut !\nno tab\n");
  NmtOptions one;
  one.num_examples = 1;
  EXPECT_EQ(corpus_error(p, one), "no error");
  EXPECT_NE(corpus_error(p).find("line 3: no tab"), std::string::npos);
}

TEST(Nmt, ReadParallelCorpusChecksLikeTraining) {
  auto c = read_parallel_corpus(kCorpus, 9);
  EXPECT_EQ(c.source.size(), 10u);
  EXPECT_EQ(c.source[0], (Tokens{"go", "."}));
  std::string p = write_temp("e_blank.txt", "\r\n");
  EXPECT_THROW(read_parallel_corpus(p, 0), IOError);
  EXPECT_THROW(read_parallel_corpus(write_temp("e_nul.txt", std::string("a\tb\0\n", 5)), 0),
               IOError);
}

TEST(Nmt, ShuffledBatchesArePermutationsFromTheSeed) {
  Generator g1(3), g2(3);
  auto a = shuffled_batches(10, 4, g1), b = shuffled_batches(10, 4, g2);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[2].size(), 2u);
  std::vector<std::int64_t> all;
  for (auto& x : a) all.insert(all.end(), x.begin(), x.end());
  std::sort(all.begin(), all.end());
  for (std::int64_t i = 0; i < 10; ++i) EXPECT_EQ(all[i], i);
}
