// attn/io/line_reader.h — text read as a stream of bounded lines.
//
// Corpora and stdin are read through here, so that every limit holds while
// reading, before memory is spent: a "line" of /dev/zero or a file without a
// newline is refused after `max_line` bytes, not after gigabytes. Gzip data
// (recognized by its magic bytes 1F 8B; several members are concatenated, as
// gzip -d does) is decompressed as it is read.
//
//   io::LineReader lines(io::open_text_source("fra.txt.gz"), "'fra.txt.gz'", 1 << 16);
//   std::string line;
//   while (lines.next(line)) use(line);
//
// Lines end at '\n'; a '\r' just before it is dropped (Windows line ends). A
// '\r' anywhere else is refused: a file with CR-only line ends (old Mac) would
// otherwise be read as one long line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attn::io {

// Where bytes come from.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to `n` bytes into `out`; 0 at the end. IOError on a read error.
  virtual std::size_t read(char* out, std::size_t n) = 0;
};

// Reads a file or stream by path: a regular file, a FIFO, /dev/stdin, a
// character device. Refuses a directory; a FIFO is waited on (the process
// still ends at SIGINT/SIGTERM: the CLI handles signals in its own thread).
std::unique_ptr<ByteSource> open_file_source(const std::string& path);
// Reads an open descriptor (not closed at the end), e.g. stdin. IOError
// "<what> is closed" when `fd` is not open.
std::unique_ptr<ByteSource> fd_source(int fd, const std::string& what);
// Bytes in memory (not copied: `bytes` must outlive the source).
std::unique_ptr<ByteSource> memory_source(std::string_view bytes);
// `source`, decompressed when it starts with the gzip magic bytes; at most
// `max_bytes` of text come out (IOError past that). `what` names it in
// errors: "<what>: truncated gzip data", "<what>: corrupt gzip data (...)",
// "<what>: N bytes after the end of the gzip data are not gzip data".
std::unique_ptr<ByteSource> text_source(std::unique_ptr<ByteSource> source, const std::string& what,
                                        std::uint64_t max_bytes);

class LineReader {
 public:
  LineReader(std::unique_ptr<ByteSource> source, std::string what, std::size_t max_line);

  // The next line, without its line end; false at the end of the text.
  // IOError "<what> line N: more than M bytes long ...", "<what> line N: a
  // carriage return (CR) inside the line ...".
  bool next(std::string& line);
  // Lines returned so far (the number of the last one).
  std::size_t line_number() const { return line_; }
  // Whether the last line returned ended with '\n' (false for a last line
  // without one).
  bool ended_with_newline() const { return newline_; }

 private:
  bool fill();

  std::unique_ptr<ByteSource> source_;
  std::string what_;
  std::size_t max_line_;
  std::vector<char> buf_;
  std::size_t begin_ = 0, end_ = 0;
  bool eof_ = false, newline_ = false;
  std::size_t line_ = 0;
};

}  // namespace attn::io
