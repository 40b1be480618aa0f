#include "attn/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <system_error>

#include "attn/core/error.h"
#include "attn/io/read_file.h"

namespace attn::io {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int err) { return std::strerror(err); }

fs::path directory_of(const fs::path& p) {
  fs::path dir = p.parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

// A name nobody else is using right now: pid, a per-process counter and a
// random number (the counter alone suffices inside one process; the random
// part keeps two processes with a recycled pid apart).
std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}.{}.{}", ::getpid(), counter.fetch_add(1), rng() % 1000000007ULL);
}

void write_all(int fd, const char* data, std::size_t size, const fs::path& temp,
               const fs::path& target) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IOError(fmt::format("AtomicFile::write: cannot write '{}' (temp file '{}'): {}",
                                target.string(), temp.string(), errno_text(errno)));
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

// fsync(path) through a fresh descriptor; returns errno or 0.
int fsync_path(const fs::path& p, int extra_flags) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | extra_flags);
  if (fd < 0) return errno;
  int err = 0;
  if (::fsync(fd) != 0) err = errno;
  ::close(fd);
  return err;
}

}  // namespace

std::string output_path_refusal(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return "";  // nothing there (or unreachable: the write says why)
  const std::string shown = path.string();
  if (!S_ISREG(st.st_mode))
    return fmt::format("'{}' is {}, not a regular file; attn does not replace it", shown,
                       file_kind(st.st_mode));
  if ((st.st_mode & 0222) == 0)
    return fmt::format("'{}' is read-only; attn does not replace it", shown);
  return "";
}

void check_output_path(const fs::path& path, std::string_view what) {
  const std::string why = output_path_refusal(path);
  if (!why.empty()) throw IOError(fmt::format("{}{}", what, why));
}

void fsync_directory(const fs::path& dir) {
  const int err = fsync_path(dir, O_DIRECTORY);
  ATTN_CHECK(err == 0 || err == EINVAL || err == EROFS, IOError, "cannot fsync directory '{}': {}",
             dir.string(), errno_text(err));
}

void ensure_directory(const fs::path& dir) {
  if (dir.empty()) return;  // the current directory
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return;
  // Find the deepest existing ancestor to report what it is when it is not a
  // directory (a link to one is followed; a dangling link is named as such).
  for (fs::path p = dir; !p.empty(); p = p.parent_path()) {
    struct stat lst {};
    if (::lstat(p.c_str(), &lst) == 0) {
      struct stat st {};
      const bool resolves = ::stat(p.c_str(), &st) == 0;
      ATTN_CHECK(resolves || !S_ISLNK(lst.st_mode), IOError,
                 "ensure_directory: cannot create directory '{}': '{}' is a symbolic link to "
                 "nothing",
                 dir.string(), p.string());
      auto kind = [](unsigned mode) {
        return S_ISREG(mode) ? std::string("a file") : file_kind(mode);
      };
      ATTN_CHECK(
          S_ISDIR(st.st_mode), IOError,
          "ensure_directory: cannot create directory '{}': '{}' is {}, not a directory",
          dir.string(), p.string(),
          S_ISLNK(lst.st_mode) ? "a symbolic link to " + kind(st.st_mode) : kind(lst.st_mode));
      break;
    }
    if (p == p.parent_path()) break;
  }
  fs::create_directories(dir, ec);
  ATTN_CHECK(!ec, IOError, "ensure_directory: cannot create directory '{}': {}", dir.string(),
             ec.message());
  ATTN_CHECK(fs::is_directory(dir, ec), IOError,
             "ensure_directory: '{}' is not a directory after creating it", dir.string());
}

AtomicFile::AtomicFile(fs::path target) : target_(std::move(target)) {
  ATTN_CHECK(!target_.empty(), ValueError, "AtomicFile: the target path is empty");
  ATTN_CHECK(target_.has_filename(), IOError,
             "AtomicFile: cannot write '{}': the path names a directory, not a file",
             target_.string());
  const fs::path dir = directory_of(target_);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    int err = errno;
    ATTN_CHECK(err != ENOENT, IOError,
               "AtomicFile: cannot write '{}': directory '{}' does not exist", target_.string(),
               dir.string());
    throw IOError(fmt::format("AtomicFile: cannot write '{}': directory '{}': {}", target_.string(),
                              dir.string(), errno_text(err)));
  }
  ATTN_CHECK(S_ISDIR(st.st_mode), IOError, "AtomicFile: cannot write '{}': '{}' is not a directory",
             target_.string(), dir.string());
  check_output_path(target_, "AtomicFile: ");

  const std::string base = fmt::format(".{}.tmp.", target_.filename().string());
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path candidate = dir / (base + unique_suffix());
    // 0666 minus the umask: the final file gets the same permissions a plain
    // open(O_CREAT) would give it.
    int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      fd_ = fd;
      temp_ = std::move(candidate);
      return;
    }
    if (errno != EEXIST) {
      throw IOError(
          fmt::format("AtomicFile: cannot write '{}': cannot create a temporary file in '{}': {}",
                      target_.string(), dir.string(), errno_text(errno)));
    }
  }
  throw IOError(fmt::format("AtomicFile: cannot write '{}': no free temporary file name in '{}'",
                            target_.string(), dir.string()));
}

AtomicFile::~AtomicFile() {
  if (!committed_) abort();
}

void AtomicFile::write(std::string_view bytes) {
  ATTN_CHECK(!committed_ && fd_ >= 0, IOError,
             "AtomicFile::write: '{}' is already committed or aborted", target_.string());
  write_all(fd_, bytes.data(), bytes.size(), temp_, target_);
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  write(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

void AtomicFile::commit() {
  ATTN_CHECK(!committed_ && !temp_.empty(), IOError,
             "AtomicFile::commit: '{}' is already committed or aborted", target_.string());
  auto fail = [&](const char* what, int err) {
    std::string msg = fmt::format("AtomicFile::commit: cannot write '{}': {} failed: {}",
                                  target_.string(), what, errno_text(err));
    abort();
    throw IOError(msg);
  };
  // Our own descriptor, plus one opened by name in case the contents were
  // written through temp_path() by another writer.
  if (::fsync(fd_) != 0) fail("fsync", errno);
  if (int err = fsync_path(temp_, 0); err != 0) fail("fsync", err);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close", errno);
  // Again, as late as can be: what appeared at the target since it was
  // checked (a link, a FIFO) is not replaced either.
  if (std::string why = output_path_refusal(target_); !why.empty()) {
    abort();
    throw IOError("AtomicFile: " + why);
  }
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail("rename", errno);
  committed_ = true;
  temp_.clear();
  // Make the rename itself durable. Some file systems cannot fsync a
  // directory (EINVAL); the file is in place, so that is not an error.
  int err = fsync_path(directory_of(target_), O_DIRECTORY);
  ATTN_CHECK(err == 0 || err == EINVAL || err == EROFS, IOError,
             "AtomicFile::commit: wrote '{}' but could not fsync its directory: {}",
             target_.string(), errno_text(err));
}

void AtomicFile::abort() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!temp_.empty()) {
    ::unlink(temp_.c_str());
    temp_.clear();
  }
}

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

void write_file_atomic(const fs::path& path, std::span<const std::byte> bytes) {
  write_file_atomic(path,
                    std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace attn::io
