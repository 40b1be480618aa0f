// A full disk for tests: loaded with LD_PRELOAD into a program under test,
// every write(2) to a regular file from the N-th on (counted from 1, in
// this process) fails with ENOSPC, as on a disk that filled at that write
// and stays full. Writes to pipes, terminals and devices (the program's
// output) are never failed, and stdio's own writes do not come through here.
//
//   ATTN_TEST_ENOSPC_AT=N      fail from the N-th write on (unset or 0: never)
//   ATTN_TEST_ENOSPC_COUNT=F   at exit, write the number of writes counted to F
//
// Only tests set these variables; attn itself reads neither.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace {

using WriteFn = ssize_t (*)(int, const void*, size_t);

std::atomic<long> counted{0};
long fail_at = 0;

WriteFn real_write() {
  static const WriteFn real = reinterpret_cast<WriteFn>(dlsym(RTLD_NEXT, "write"));
  return real;
}

__attribute__((constructor)) void read_settings() {
  const char* at = std::getenv("ATTN_TEST_ENOSPC_AT");
  fail_at = at ? std::atol(at) : 0;
}

__attribute__((destructor)) void report() {
  const char* path = std::getenv("ATTN_TEST_ENOSPC_COUNT");
  if (!path || !*path) return;
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char text[32];
  const int n = std::snprintf(text, sizeof text, "%ld\n", counted.load());
  if (n > 0) real_write()(fd, text, static_cast<size_t>(n));
  ::close(fd);
}

}  // namespace

extern "C" ssize_t write(int fd, const void* buf, size_t count) {
  struct stat st {};
  if (count > 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    const long n = counted.fetch_add(1) + 1;
    if (fail_at > 0 && n >= fail_at) {
      errno = ENOSPC;
      return -1;
    }
  }
  return real_write()(fd, buf, count);
}
