#include "attn/io/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "attn/core/error.h"
#include "attn/io/json.h"

namespace attn::io {

namespace fs = std::filesystem;

namespace {

// The lock files this process holds, by (device, inode).
std::mutex g_held_mutex;
std::set<std::pair<dev_t, ino_t>>& held() {
  static std::set<std::pair<dev_t, ino_t>> s;
  return s;
}

bool identity(int fd, std::pair<dev_t, ino_t>& id) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  id = {st.st_dev, st.st_ino};
  return true;
}

// What the holder wrote into the lock file: "process 4242 (attn train)".
// The holder writes it right after taking the lock, so a reader that came in
// between finds the file empty: it looks again for up to 100 ms before
// settling for "another process".
std::string holder_of(int fd) {
  std::string text;
  for (int attempt = 0; attempt < 50 && text.empty(); ++attempt) {
    if (attempt > 0) ::usleep(2000);
    char buf[256] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    text = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  }
  return text.empty() ? "another process" : printable_excerpt(text, 120);
}

bool held_here(const fs::path& dir) {
  struct stat st {};
  if (::stat((dir / kLockFile).c_str(), &st) != 0) return false;
  std::lock_guard<std::mutex> g(g_held_mutex);
  return held().count({st.st_dev, st.st_ino}) > 0;
}

}  // namespace

DirectoryLock::DirectoryLock(const fs::path& dir, const std::string& label)
    : path_(dir / kLockFile) {
  int fd = -1;
  for (;;) {
    fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    ATTN_CHECK(fd >= 0, IOError, "cannot lock '{}': cannot open '{}': {}", dir.string(),
               path_.string(), std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      std::string holder = err == EWOULDBLOCK ? holder_of(fd) : "";
      ::close(fd);
      ATTN_CHECK(err == EWOULDBLOCK, IOError, "cannot lock '{}': {}", dir.string(),
                 std::strerror(err));
      throw IOError(
          fmt::format("'{}' is in use by {}; wait for it to end or stop it", dir.string(), holder));
    }
    // A holder that removes the lock file (release_and_remove) may have done
    // so between the open and the flock above: this lock is then on a file
    // nobody else will open, and the next writer would make a new one and
    // lock that too. Only the file the path names now counts; else again.
    std::pair<dev_t, ino_t> held_id;
    struct stat named = {};
    if (identity(fd, held_id) && ::stat(path_.c_str(), &named) == 0 &&
        held_id == std::make_pair(named.st_dev, named.st_ino))
      break;
    ::close(fd);
  }
  std::string me = fmt::format("process {} ({})\n", ::getpid(), label);
  if (::ftruncate(fd, 0) == 0) {
    ssize_t ignored = ::pwrite(fd, me.data(), me.size(), 0);
    (void)ignored;  // only a courtesy for the message of a second writer
  }
  std::pair<dev_t, ino_t> id;
  if (identity(fd, id)) {
    std::lock_guard<std::mutex> g(g_held_mutex);
    held().insert(id);
  }
  fd_ = fd;
}

DirectoryLock::~DirectoryLock() {
  if (fd_ < 0) return;
  std::pair<dev_t, ino_t> id;
  if (identity(fd_, id)) {
    std::lock_guard<std::mutex> g(g_held_mutex);
    held().erase(id);
  }
  if (::ftruncate(fd_, 0) != 0) {
    // only the courtesy text stays; the next holder overwrites it
  }
  ::close(fd_);  // releases the flock
}

void DirectoryLock::release_and_remove() {
  if (fd_ < 0) return;
  std::pair<dev_t, ino_t> id;
  if (identity(fd_, id)) {
    std::lock_guard<std::mutex> g(g_held_mutex);
    held().erase(id);
  }
  ::unlink(path_.c_str());  // while still held
  ::close(fd_);
  fd_ = -1;
}

WriteGuard::WriteGuard(const fs::path& dir, const std::string& label) {
  if (!held_here(dir)) own_ = std::make_unique<DirectoryLock>(dir, label);
}

WriteGuard::~WriteGuard() = default;

void WriteGuard::release_and_remove() {
  if (own_) own_->release_and_remove();
}

bool directory_locked(const fs::path& dir) {
  int fd = ::open((dir / kLockFile).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  bool locked = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // drops the shared lock if it was taken
  return locked;
}

}  // namespace attn::io
