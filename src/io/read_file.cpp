#include "attn/io/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "attn/core/error.h"

namespace attn::io {

std::string read_file_bytes(const std::string& path, std::uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ATTN_CHECK(fd >= 0, IOError, "cannot open '{}': {}", path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  ATTN_CHECK(::fstat(fd, &st) == 0, IOError, "cannot read '{}': {}", path, std::strerror(errno));
  ATTN_CHECK(!S_ISDIR(st.st_mode), IOError, "cannot read '{}': it is a directory", path);
  const bool regular = S_ISREG(st.st_mode);
  ATTN_CHECK(!regular || static_cast<std::uint64_t>(st.st_size) <= max_bytes, IOError,
             "'{}' is {} bytes, more than the {} bytes attn reads from it", path, st.st_size,
             max_bytes);
  std::string out;
  if (regular) out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IOError(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    ATTN_CHECK(out.size() <= max_bytes, IOError,
               "'{}' holds more than the {} bytes attn reads from it", path, max_bytes);
  }
  return out;
}

}  // namespace attn::io
