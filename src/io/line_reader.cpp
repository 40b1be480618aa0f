#include "attn/io/line_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "attn/core/error.h"

namespace attn::io {

namespace {

class FdSource : public ByteSource {
 public:
  FdSource(int fd, std::string what, bool owned) : fd_(fd), what_(std::move(what)), owned_(owned) {}
  ~FdSource() override {
    if (owned_) ::close(fd_);
  }
  std::size_t read(char* out, std::size_t n) override {
    for (;;) {
      ssize_t got = ::read(fd_, out, n);
      if (got >= 0) return static_cast<std::size_t>(got);
      if (errno == EINTR) continue;
      throw IOError(fmt::format("cannot read {}: {}", what_, std::strerror(errno)));
    }
  }

 private:
  int fd_;
  std::string what_;
  bool owned_;
};

class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  std::size_t read(char* out, std::size_t n) override {
    n = std::min(n, bytes_.size() - pos_);
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
    return n;
  }

 private:
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

bool gzip_magic(const char* p, std::size_t n) {
  return n >= 2 && static_cast<unsigned char>(p[0]) == 0x1F &&
         static_cast<unsigned char>(p[1]) == 0x8B;
}

// Plain or gzip text, with a cap on what comes out.
class TextSource : public ByteSource {
 public:
  TextSource(std::unique_ptr<ByteSource> in, std::string what, std::uint64_t max_bytes)
      : in_(std::move(in)), what_(std::move(what)), max_(max_bytes), buf_(1 << 16) {
    // Peek at the first two bytes (a short read may give one at a time).
    while (have_ < 2) {
      std::size_t got = in_->read(buf_.data() + have_, buf_.size() - have_);
      if (got == 0) break;
      have_ += got;
    }
    gzip_ = gzip_magic(buf_.data(), have_);
    if (gzip_) {
      ATTN_CHECK(inflateInit2(&zs_, 16 + MAX_WBITS) == Z_OK, IOError,
                 "{}: cannot start gzip decompression", what_);
      zs_.next_in = reinterpret_cast<Bytef*>(buf_.data());
      zs_.avail_in = static_cast<uInt>(have_);
    }
  }
  ~TextSource() override {
    if (gzip_) inflateEnd(&zs_);
  }

  std::size_t read(char* out, std::size_t n) override {
    std::size_t got = gzip_ ? inflate_some(out, n) : plain_some(out, n);
    produced_ += got;
    ATTN_CHECK(produced_ <= max_, IOError, "{}: more text than attn reads ({} bytes)", what_, max_);
    return got;
  }

 private:
  std::size_t plain_some(char* out, std::size_t n) {
    if (pos_ < have_) {  // the bytes peeked at first
      n = std::min(n, have_ - pos_);
      std::memcpy(out, buf_.data() + pos_, n);
      pos_ += n;
      return n;
    }
    return in_->read(out, n);
  }

  std::size_t inflate_some(char* out, std::size_t n) {
    if (done_) return 0;
    n = std::min<std::size_t>(n, 1u << 30);
    zs_.next_out = reinterpret_cast<Bytef*>(out);
    zs_.avail_out = static_cast<uInt>(n);
    while (zs_.avail_out == n) {  // until something comes out, or the end
      if (zs_.avail_in == 0) {
        std::size_t got = in_->read(buf_.data(), buf_.size());
        zs_.next_in = reinterpret_cast<Bytef*>(buf_.data());
        zs_.avail_in = static_cast<uInt>(got);
        if (got == 0) {
          ATTN_CHECK(between_members_, IOError,
                     "{}: truncated gzip data (the compressed stream ends early)", what_);
          done_ = true;
          break;
        }
      }
      if (between_members_) {
        // After a member: more gzip data, or junk.
        trailing_ += zs_.avail_in;
        if (!gzip_magic(reinterpret_cast<const char*>(zs_.next_in), zs_.avail_in)) {
          // Count the rest, for the message.
          for (std::size_t got; (got = in_->read(buf_.data(), buf_.size())) > 0;) trailing_ += got;
          throw IOError(fmt::format("{}: {} bytes after the end of the gzip data are not gzip data",
                                    what_, trailing_));
        }
        trailing_ = 0;
        between_members_ = false;
        ATTN_CHECK(inflateReset(&zs_) == Z_OK, IOError, "{}: cannot restart gzip decompression",
                   what_);
      }
      int ret = inflate(&zs_, Z_NO_FLUSH);
      if (ret == Z_STREAM_END) {
        between_members_ = true;
        continue;
      }
      if (ret == Z_OK || ret == Z_BUF_ERROR) continue;  // Z_BUF_ERROR: needs more input
      if (ret == Z_MEM_ERROR) throw std::bad_alloc();
      throw IOError(fmt::format("{}: corrupt gzip data ({})", what_,
                                zs_.msg != nullptr ? zs_.msg : "inflate failed"));
    }
    return n - zs_.avail_out;
  }

  std::unique_ptr<ByteSource> in_;
  std::string what_;
  std::uint64_t max_, produced_ = 0;
  std::vector<char> buf_;
  std::size_t have_ = 0, pos_ = 0;
  bool gzip_ = false, done_ = false, between_members_ = false;
  std::uint64_t trailing_ = 0;
  z_stream zs_{};
};

}  // namespace

std::unique_ptr<ByteSource> open_file_source(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ATTN_CHECK(fd >= 0, IOError, "cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    int err = errno;
    bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    ATTN_CHECK(!dir, IOError, "cannot read '{}': it is a directory", path);
    throw IOError(fmt::format("cannot read '{}': {}", path, std::strerror(err)));
  }
  return std::make_unique<FdSource>(fd, fmt::format("'{}'", path), /*owned=*/true);
}

std::unique_ptr<ByteSource> fd_source(int fd, const std::string& what) {
  struct stat st {};
  ATTN_CHECK(::fstat(fd, &st) == 0, IOError, "{} is closed", what);
  ATTN_CHECK(!S_ISDIR(st.st_mode), IOError, "cannot read {}: it is a directory", what);
  return std::make_unique<FdSource>(fd, what, /*owned=*/false);
}

std::unique_ptr<ByteSource> memory_source(std::string_view bytes) {
  return std::make_unique<MemorySource>(bytes);
}

std::unique_ptr<ByteSource> text_source(std::unique_ptr<ByteSource> source, const std::string& what,
                                        std::uint64_t max_bytes) {
  return std::make_unique<TextSource>(std::move(source), what, max_bytes);
}

LineReader::LineReader(std::unique_ptr<ByteSource> source, std::string what, std::size_t max_line)
    : source_(std::move(source)),
      what_(std::move(what)),
      max_line_(max_line),
      buf_(std::max<std::size_t>(2 * max_line + 2, 1 << 16)) {}

bool LineReader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {  // keep the partial line at the front
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  std::size_t got = source_->read(buf_.data() + end_, buf_.size() - end_);
  if (got == 0) eof_ = true;
  end_ += got;
  return got > 0;
}

bool LineReader::next(std::string& line) {
  std::size_t scanned = begin_;
  for (;;) {
    const char* start = buf_.data() + begin_;
    const void* nl = std::memchr(buf_.data() + scanned, '\n', end_ - scanned);
    std::size_t len =
        nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - start) : end_ - begin_;
    if (nl || eof_) {
      if (!nl && len == 0) return false;  // the end, after a final '\n'
      std::size_t content = len;
      if (content > 0 && start[content - 1] == '\r') --content;
      ATTN_CHECK(content <= max_line_, IOError,
                 "{} line {}: {} bytes long, more than the limit of {} bytes per line", what_,
                 line_ + 1, content, max_line_);
      const void* cr = std::memchr(start, '\r', content);
      ATTN_CHECK(cr == nullptr, IOError,
                 "{} line {}: a carriage return (CR) inside the line: CR-only line ends are not "
                 "supported (convert them to '\\n', e.g. with tr '\\r' '\\n')",
                 what_, line_ + 1);
      line.assign(start, content);
      newline_ = nl != nullptr;
      begin_ += len + (nl ? 1 : 0);
      ++line_;
      return true;
    }
    // No '\n' yet: a line longer than the limit (plus its '\r') fails now,
    // before more is read.
    ATTN_CHECK(len <= max_line_ + 1, IOError,
               "{} line {}: more than the limit of {} bytes per line", what_, line_ + 1, max_line_);
    scanned = end_;
    const std::size_t offset = scanned - begin_;
    fill();
    scanned = begin_ + offset;
  }
}

}  // namespace attn::io
