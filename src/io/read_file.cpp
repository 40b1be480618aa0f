#include "attn/io/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "attn/core/error.h"
#include "attn/io/digest.h"

namespace attn::io {

namespace {

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string file_kind(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

std::string read_file_bytes(const std::string& path, std::uint64_t max_bytes) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  ATTN_CHECK(f.fd >= 0, IOError, "cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  ATTN_CHECK(::fstat(f.fd, &st) == 0, IOError, "cannot read '{}': {}", path, std::strerror(errno));
  ATTN_CHECK(!S_ISDIR(st.st_mode), IOError, "cannot read '{}': it is a directory", path);
  const bool regular = S_ISREG(st.st_mode);
  ATTN_CHECK(!regular || static_cast<std::uint64_t>(st.st_size) <= max_bytes, IOError,
             "'{}' is {} bytes, more than the {} bytes attn reads from it", path, st.st_size,
             max_bytes);
  std::string out;
  if (regular) out.reserve(static_cast<std::size_t>(st.st_size));
  std::vector<char> buf(1 << 16);
  for (;;) {
    ssize_t n = ::read(f.fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IOError(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
    }
    if (n == 0) break;
    ATTN_CHECK(out.size() + static_cast<std::size_t>(n) <= max_bytes, IOError,
               "'{}' holds more than the {} bytes attn reads from it", path, max_bytes);
    out.append(buf.data(), static_cast<std::size_t>(n));
  }
  return out;
}

InputFile::InputFile(std::string path) : path_(std::move(path)) {
  // O_NONBLOCK: opening a FIFO without a writer would wait forever.
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  ATTN_CHECK(fd >= 0, IOError, "cannot open '{}': {}", path_, std::strerror(errno));
  Fd guard{fd};
  struct stat st {};
  ATTN_CHECK(::fstat(fd, &st) == 0, IOError, "cannot read '{}': {}", path_, std::strerror(errno));
  ATTN_CHECK(!S_ISDIR(st.st_mode), IOError, "cannot read '{}': it is a directory", path_);
  ATTN_CHECK(S_ISREG(st.st_mode), IOError, "cannot read '{}': it is {}, not a regular file", path_,
             file_kind(st.st_mode));
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  size_ = static_cast<std::uint64_t>(st.st_size);
  fd_ = fd;
  guard.fd = -1;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

InputFile::InputFile(InputFile&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), size_(o.size_), bytes_(std::move(o.bytes_)) {
  o.fd_ = -1;
}

InputFile& InputFile::operator=(InputFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    size_ = o.size_;
    bytes_ = std::move(o.bytes_);
    o.fd_ = -1;
  }
  return *this;
}

void InputFile::read_at(std::uint64_t offset, void* out, std::size_t n) const {
  char* p = static_cast<char*>(out);
  if (bytes_) {
    ATTN_CHECK(offset <= bytes_->size() && n <= bytes_->size() - offset, IOError,
               "'{}': bytes [{}, {}) are past its end ({} bytes)", path_, offset, offset + n,
               bytes_->size());
    std::memcpy(p, bytes_->data() + offset, n);
    return;
  }
  while (n > 0) {
    ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw IOError(fmt::format("cannot read '{}': {}", path_, std::strerror(errno)));
    }
    ATTN_CHECK(got > 0, IOError, "'{}' ends at byte {}, before the {} bytes it had when opened",
               path_, offset, size_);
    p += got;
    n -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
}

std::string InputFile::read_all(std::uint64_t max_bytes) const {
  ATTN_CHECK(size_ <= max_bytes, IOError,
             "'{}' is {} bytes, more than the {} bytes attn reads from it", path_, size_,
             max_bytes);
  std::string out(static_cast<std::size_t>(size_), '\0');
  read_at(0, out.data(), out.size());
  return out;
}

void InputFile::snapshot(std::uint64_t max_bytes) {
  if (bytes_) return;
  bytes_ = std::make_shared<const std::string>(read_all(max_bytes));
}

std::string InputFile::sha256() const {
  if (bytes_) return sha256_hex(*bytes_);
  Sha256 h;
  std::vector<char> buf(std::size_t{1} << 20);
  for (std::uint64_t pos = 0; pos < size_;) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), size_ - pos));
    read_at(pos, buf.data(), n);
    h.update(buf.data(), n);
    pos += n;
  }
  return h.hex();
}

}  // namespace attn::io
