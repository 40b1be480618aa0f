#include "attn/data/vocab.h"

#include <filesystem>
#include <fstream>

#include "attn/core/error.h"
#include "attn/data/nmt.h"
#include "testing.h"

using namespace attn;
using namespace attn::data;
namespace fs = std::filesystem;

namespace {

std::string parse_error(const std::string& text,
                        const std::vector<std::string>& required = kReservedTokens) {
  try {
    Vocab::parse(text, "'v.txt'", required);
  } catch (const IOError& e) {
    return e.what();
  }
  return "no error";
}

class VocabFiles : public attn::testing::TempDirTest {};

}  // namespace

TEST(VocabParse, AcceptsWhatSaveWrites) {
  Vocab v({{"x", "y", "", "x", "\xC3\xA0"}}, 1, kReservedTokens);
  EXPECT_EQ(v.to_text(), "<unk>\n<pad>\n<bos>\n<eos>\nx\ny\n\n\xC3\xA0\n");
  Vocab w = Vocab::parse(v.to_text(), "'v'", kReservedTokens);
  EXPECT_EQ(w.tokens(), v.tokens());
  EXPECT_EQ(w[""], 6);  // the empty token (d2l's split(' ') makes it) is an empty line
}

TEST(VocabParse, UnkMayBeAtAnyIndex) {
  // d2l 1.0 sorts its tokens: "!", "." and "'s" sort before "<unk>".
  Vocab v = Vocab::parse("!\n's\n.\n<bos>\n<eos>\n<pad>\n<unk>\nva\n", "'v'", kReservedTokens);
  EXPECT_EQ(v.unk(), 6);
  EXPECT_EQ(v["va"], 7);
  EXPECT_EQ(v["never-seen"], 6);
  EXPECT_EQ(v.indices({"!", "zut", "va"}), (std::vector<std::int64_t>{0, 6, 7}));
  EXPECT_EQ(Vocab::parse(v.to_text(), "'v'").tokens(), v.tokens());
  // Built from a corpus (d2l 0.17's order), <unk> is first.
  EXPECT_EQ(Vocab({{"b", "a"}}, 1, kReservedTokens).unk(), 0);
  EXPECT_EQ(Vocab::from_tokens({"a", "<unk>"})["z"], 1);
  EXPECT_THROW(Vocab::from_tokens({"a", "b"}), ValueError);
}

TEST(VocabParse, EveryBadFileIsOneNamedLine) {
  EXPECT_EQ(parse_error(""), "'v.txt' is empty");
  EXPECT_EQ(parse_error("<unk>\n<pad>\n<bos>\n<eos>\na"),
            "'v.txt' line 5: no final newline: truncated vocabulary?");
  EXPECT_EQ(parse_error("<pad>\n<bos>\n<eos>\nva\n"),
            "'v.txt': the token <unk> is missing (unknown words map to it)");
  EXPECT_EQ(parse_error("va\n", {}),
            "'v.txt': the token <unk> is missing (unknown words map to it)");
  EXPECT_EQ(parse_error("<unk>\r\n<pad>\r\n"),
            "'v.txt' line 1: ends in a carriage return (this file has Windows line endings)");
  EXPECT_EQ(parse_error("!\r\n<unk>\r\n"),
            "'v.txt' line 1: ends in a carriage return (this file has Windows line endings)");
  EXPECT_EQ(parse_error("<unk>\n<pad>\n<bos>\n<eos>\nchat\nchien\nchat\n"),
            "'v.txt' line 7: token 'chat' appears twice (first at line 5)");
  EXPECT_EQ(parse_error("<unk>\n<pad>\n<eos>\nva\n"),
            "'v.txt': the reserved token <bos> is missing");
  EXPECT_EQ(parse_error("<unk>\nva\n", {}), "no error");  // nothing required
  EXPECT_EQ(parse_error("<unk>\n<pad>\n<bos>\n<eos>\nva\xC3\n"),
            "'v.txt' line 5: invalid UTF-8 at byte 3 of the line (0xC3)");
  std::string huge(kMaxLineBytes + 1, 'z');
  EXPECT_EQ(parse_error("<unk>\n<pad>\n<bos>\n<eos>\n" + huge + "\n"),
            "'v.txt' line 5: 65537 bytes long, more than the limit of 65536 bytes per token");
  EXPECT_EQ(parse_error(std::string("<unk>\n\0\n", 8)),
            "'v.txt' line 2: a NUL byte at byte 1 of the line: not a text file");
}

TEST_F(VocabFiles, SaveIsAtomicAndLoadNamesThePath) {
  Vocab v({{"a", "b"}}, 1, kReservedTokens);
  std::string path = (dir_ / "src_vocab.txt").string();
  v.save(path);
  EXPECT_EQ(names(), (std::vector<std::string>{"src_vocab.txt"}));  // no temp file left
  EXPECT_EQ(Vocab::load(path, kReservedTokens).tokens(), v.tokens());
  std::ofstream(path, std::ios::binary) << "<unk>\n<pad>\n";
  try {
    Vocab::load(path, kReservedTokens);
    FAIL();
  } catch (const IOError& e) {
    EXPECT_EQ(std::string(e.what()), "'" + path + "': the reserved token <bos> is missing");
  }
  EXPECT_THROW(v.save((dir_ / "no-such-dir" / "v.txt").string()), IOError);
  EXPECT_THROW(Vocab::from_tokens({"<unk>", "a\nb"}).to_text(), ValueError);
}
