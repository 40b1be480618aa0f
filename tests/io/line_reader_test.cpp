// Bounded line reading (io/line_reader.h) and regular-file input (io/read_file.h).
#include "attn/io/line_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <zlib.h>

#include <fstream>

#include "attn/io/read_file.h"
#include "gzip.h"
#include "testing.h"

using namespace attn;
using namespace attn::io;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> lines_of(const std::string& bytes, std::size_t max_line = 16) {
  LineReader r(text_source(memory_source(bytes), "'t'", 1 << 20), "'t'", max_line);
  std::vector<std::string> out;
  std::string line;
  while (r.next(line)) out.push_back(line);
  return out;
}

std::string error_of(const std::string& bytes, std::size_t max_line = 16) {
  try {
    lines_of(bytes, max_line);
  } catch (const IOError& e) {
    return e.what();
  }
  return "no error";
}

using attn::testing::gzip;

// A source that gives one byte per read: every boundary case of the buffer.
class Trickle : public ByteSource {
 public:
  explicit Trickle(std::string s) : s_(std::move(s)) {}
  std::size_t read(char* out, std::size_t n) override {
    if (pos_ == s_.size() || n == 0) return 0;
    *out = s_[pos_++];
    return 1;
  }

 private:
  std::string s_;
  std::size_t pos_ = 0;
};

}  // namespace

TEST(LineReader, LinesAndLineEnds) {
  EXPECT_EQ(lines_of("a\nbb\n\nccc"), (std::vector<std::string>{"a", "bb", "", "ccc"}));
  EXPECT_EQ(lines_of("a\r\nb\r\n"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(lines_of(""), std::vector<std::string>{});
  EXPECT_EQ(lines_of("\n"), std::vector<std::string>{""});
  EXPECT_EQ(lines_of(gzip("x\ty\nz\n") + gzip("w\n")),
            (std::vector<std::string>{"x\ty", "z", "w"}));
  LineReader r(std::make_unique<Trickle>("ab\r\ncd\nef"), "'t'", 4);
  std::string line;
  std::vector<std::string> got;
  while (r.next(line)) got.push_back(line);
  EXPECT_EQ(got, (std::vector<std::string>{"ab", "cd", "ef"}));
  EXPECT_EQ(r.line_number(), 3u);
  EXPECT_FALSE(r.ended_with_newline());
}

TEST(LineReader, LimitsHoldWhileReading) {
  EXPECT_EQ(lines_of(std::string(16, 'x') + "\n").at(0).size(), 16u);
  EXPECT_EQ(error_of("ok\n" + std::string(17, 'x') + "\n"),
            "'t' line 2: 17 bytes long, more than the limit of 16 bytes per line");
  // A line without end is refused once the limit is passed, not at its end:
  // the source below would never end.
  class Endless : public ByteSource {
    std::size_t read(char* out, std::size_t n) override {
      std::memset(out, 'z', n);
      return n;
    }
  };
  LineReader endless(std::make_unique<Endless>(), "'/dev/zero'", 1 << 16);
  std::string line;
  try {
    endless.next(line);
    ADD_FAILURE();
  } catch (const IOError& e) {
    EXPECT_EQ(std::string(e.what()),
              "'/dev/zero' line 1: more than the limit of 65536 bytes per line");
  }
  EXPECT_NE(error_of("a\tb\rc\td\r").find("'t' line 1: a carriage return (CR) inside the line"),
            std::string::npos);
  // The text limit, through gzip.
  std::string big(3000, 'a');
  big += "\n";
  LineReader capped(text_source(memory_source(gzip(big)), "'c.gz'", 1000), "'c.gz'", 1 << 16);
  EXPECT_THROW(capped.next(line), IOError);
}

TEST(LineReader, GzipDamageIsNamed) {
  const std::string z = gzip("go .\tva !\n");
  EXPECT_EQ(error_of(z.substr(0, z.size() - 5)),
            "'t': truncated gzip data (the compressed stream ends early)");
  EXPECT_EQ(error_of(z + "junk"), "'t': 4 bytes after the end of the gzip data are not gzip data");
  std::string bad = z;
  bad[bad.size() - 6] ^= 0x55;  // the CRC
  EXPECT_EQ(error_of(bad).rfind("'t': corrupt gzip data", 0), 0u);
}

class InputFileTest : public attn::testing::TempDirTest {};

TEST_F(InputFileTest, OnlyRegularFilesWithoutBlocking) {
  const fs::path f = dir_ / "f";
  std::ofstream(f) << "hello";
  InputFile in(f.string());
  EXPECT_EQ(in.size(), 5u);
  EXPECT_EQ(in.read_all(5), "hello");
  EXPECT_THROW(in.read_all(4), IOError);
  char c = 0;
  in.read_at(4, &c, 1);
  EXPECT_EQ(c, 'o');
  EXPECT_THROW(in.read_at(4, &c, 2), IOError);
  // A FIFO without a writer: refused at once, never waited on.
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0644), 0);
  try {
    InputFile fifo((dir_ / "fifo").string());
    ADD_FAILURE();
  } catch (const IOError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot read '" + (dir_ / "fifo").string() + "': it is a FIFO, not a regular file");
  }
  EXPECT_THROW(InputFile("/dev/zero"), IOError);
  EXPECT_THROW(InputFile(dir_.string()), IOError);
  fs::create_symlink("loop", dir_ / "loop");
  try {
    InputFile loop((dir_ / "loop").string());
    ADD_FAILURE();
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("Too many levels of symbolic links"), std::string::npos);
  }
}
