#include "attn/data/text.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "attn/core/error.h"
#include "gzip.h"
#include "testing.h"

using namespace attn;
using namespace attn::data;
namespace fs = std::filesystem;

namespace {

using attn::testing::gzip;

template <class F>
std::string io_error(F&& f) {
  try {
    f();
  } catch (const IOError& e) {
    return e.what();
  }
  return "no error";
}

class TextFiles : public attn::testing::TempDirTest {
 protected:
  std::string write(const std::string& name, const std::string& bytes) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
};

}  // namespace

TEST(DecodeText, PlainAndGzipAndConcatenatedMembers) {
  EXPECT_EQ(decode_text("go .\tva !\n", "'x'"), "go .\tva !\n");
  EXPECT_EQ(decode_text(gzip("go .\tva !\n"), "'x'"), "go .\tva !\n");
  // Two gzip members read as one text, as gzip -d does.
  EXPECT_EQ(decode_text(gzip("a\tb\n") + gzip("c\td\n"), "'x'"), "a\tb\nc\td\n");
  std::string big(300000, 'x');  // more than one output buffer
  EXPECT_EQ(decode_text(gzip(big), "'x'"), big);
}

TEST(DecodeText, TruncatedCorruptTrailingAndEmptyGzip) {
  std::string z = gzip("go .\tva !\nhi .\tsalut !\n");
  EXPECT_EQ(io_error([&] { decode_text(z.substr(0, z.size() - 5), "'c.gz'"); }),
            "'c.gz': truncated gzip data (the compressed stream ends early)");
  EXPECT_EQ(io_error([&] { decode_text(z.substr(0, 2), "'c.gz'"); }),
            "'c.gz': truncated gzip data (the compressed stream ends early)");
  std::string bad_crc = z;
  bad_crc[bad_crc.size() - 6] ^= 0x55;  // the CRC-32 in the trailer
  EXPECT_EQ(io_error([&] { decode_text(bad_crc, "'c.gz'"); }),
            "'c.gz': corrupt gzip data (incorrect data check)");
  std::string bad_block = z;
  bad_block[10] = static_cast<char>(0xFF);  // the first deflate block header
  EXPECT_NE(io_error([&] { decode_text(bad_block, "'c.gz'"); }).find("'c.gz': corrupt gzip data"),
            std::string::npos);
  EXPECT_EQ(io_error([&] { decode_text(z + "junk", "'c.gz'"); }),
            "'c.gz': 4 bytes after the end of the gzip data are not gzip data");
  EXPECT_EQ(io_error([&] { decode_text(gzip(""), "'c.gz'"); }), "'c.gz' is empty");
  EXPECT_EQ(io_error([&] { decode_text("", "'c.txt'"); }), "'c.txt' is empty");
}

TEST_F(TextFiles, ReadTextFileNamesTheFile) {
  EXPECT_EQ(read_text_file(write("a.txt.gz", gzip("x\ty\n"))), "x\ty\n");
  std::string missing = (dir_ / "nope.txt").string();
  EXPECT_EQ(io_error([&] { read_text_file(missing); }),
            "cannot open '" + missing + "': No such file or directory");
  EXPECT_EQ(io_error([&] { read_text_file(dir_.string()); }),
            "cannot read '" + dir_.string() + "': it is a directory");
  std::string empty = write("empty.txt", "");
  EXPECT_EQ(io_error([&] { read_text_file(empty); }), "'" + empty + "' is empty");
}

TEST(CheckUtf8, NamesLineAndByte) {
  EXPECT_NO_THROW(check_utf8("go .\tva !\n\xC3\xA0 l'aide\n\xF0\x9F\x98\x80\n", "'c'"));
  EXPECT_EQ(io_error([] { check_utf8("ok\nab\xFF\n", "'c.txt'"); }),
            "'c.txt' line 2: invalid UTF-8 at byte 3 of the line (0xFF)");
  EXPECT_EQ(io_error([] { check_utf8("\xC0\xAF", "'c'"); }),  // overlong '/'
            "'c' line 1: invalid UTF-8 at byte 1 of the line (0xC0)");
  EXPECT_EQ(io_error([] { check_utf8("a\xED\xA0\x80", "'c'"); }),  // a surrogate
            "'c' line 1: invalid UTF-8 at byte 2 of the line (0xED)");
  EXPECT_EQ(io_error([] { check_utf8("x\n\xE2\x82", "'c'"); }),  // cut in the middle
            "'c' line 2: invalid UTF-8 at byte 1 of the line (0xE2)");
  EXPECT_EQ(io_error([] { check_utf8("\xF4\x90\x80\x80", "'c'"); }),  // past U+10FFFF
            "'c' line 1: invalid UTF-8 at byte 1 of the line (0xF4)");
  EXPECT_EQ(io_error([] { check_utf8(std::string("a\tb\nc\0d", 7), "'c'"); }),
            "'c' line 2: a NUL byte at byte 2 of the line: not a text file");
}

TEST(TokenizeNmt, HugeLinesAndLinesWithoutTabsAreNamed) {
  std::string ok(kMaxLineBytes - 2, 'a');
  EXPECT_EQ(tokenize_nmt(ok + "\tb\n", 0, "'c'").source.size(), 1u);
  std::string huge(kMaxLineBytes + 1, 'a');
  EXPECT_EQ(io_error([&] { tokenize_nmt("go\tva\n" + huge + "\n", 0, "'c.txt'"); }),
            "'c.txt' line 2: 65537 bytes long, more than the limit of 65536 bytes per line");
  // Beyond num_examples + 1 lines nothing is read, so nothing is checked either.
  EXPECT_EQ(tokenize_nmt("go\tva\nhi\tsalut\n" + huge, 1, "'c'").source.size(), 2u);
  // Control characters of a quoted line are shown as '?', long lines cut.
  EXPECT_EQ(io_error([] { tokenize_nmt("a\x1b[31mred\n", 0, "'c'"); }),
            "'c' line 1: no tab between source and target: 'a?[31mred'");
  EXPECT_EQ(io_error([&] { tokenize_nmt(std::string(100, 'b'), 0, "'c'"); }),
            "'c' line 1: no tab between source and target: '" + std::string(60, 'b') + "...'");
  // Windows line endings and blank lines are fine.
  auto c = tokenize_nmt("go .\tva !\r\n\r\n\nhi .\tsalut !", 0, "'c'");
  ASSERT_EQ(c.source.size(), 2u);
  EXPECT_EQ(c.target[0], (Tokens{"va", "!"}));
}

TEST(PrintableExcerpt, CutsAtCharacterBoundaries) {
  EXPECT_EQ(printable_excerpt("abc", 10), "abc");
  EXPECT_EQ(printable_excerpt("ab\xC3\xA9z", 3), "ab...");  // does not split é
  EXPECT_EQ(printable_excerpt("a\tb\r", 10), "a?b?");
}
