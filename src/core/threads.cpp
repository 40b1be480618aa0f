#include "attn/core/threads.h"

#include <dirent.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/contention.h"

namespace attn {
namespace {

// Applies ATTN_NUM_THREADS once, so oneDNN sees the same setting.
struct ThreadsFromEnv {
  ThreadsFromEnv() {
    if (const char* s = std::getenv("ATTN_NUM_THREADS")) {
      char* end = nullptr;
      long n = std::strtol(s, &end, 10);
      if (end != s && *end == '\0' && n > 0 && n <= 1024) omp_set_num_threads(static_cast<int>(n));
    }
  }
};

// The number of runnable tasks on the machine (/proc/loadavg's fourth field,
// "running/total"), or -1 where it cannot be read.
int runnable_tasks() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return -1;
  double l1, l5, l15;
  int running = -1, total = 0;
  if (std::fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) != 5) running = -1;
  std::fclose(f);
  return running;
}

// The number of this process's threads that are running or runnable now
// (state R in /proc/self/task/*/stat), or -1.
int own_runnable_threads() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    char buf[512];
    const std::string path = std::string("/proc/self/task/") + e->d_name + "/stat";
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) continue;  // the thread has just ended
    const std::size_t len = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[len] = '\0';
    const char* paren = std::strrchr(buf, ')');  // the name may hold spaces and ')'
    if (paren != nullptr && paren[1] == ' ' && paren[2] == 'R') ++n;
  }
  closedir(dir);
  return n;
}

struct Contention {
  std::atomic<std::int64_t> next_sample_ns{0};
  std::atomic<bool> busy{false};  // filter.busy(), for the threads that do not sample
  std::atomic_flag sampling = ATOMIC_FLAG_INIT;  // one sampler at a time owns `filter`
  detail::ContentionFilter filter;
  const int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  const bool enabled = [] {
    const char* s = std::getenv("ATTN_ADAPTIVE_THREADS");
    return s == nullptr || std::strcmp(s, "0") != 0;
  }();

  // Others' runnable tasks and attn's team outnumber the cores: busy. The
  // state follows the samples as core/contention.h describes.
  void sample(std::int64_t now) {
    if (sampling.test_and_set(std::memory_order_acquire)) return;
    const int running = runnable_tasks(), own = own_runnable_threads();
    if (running >= 0 && own >= 0 && cores > 0) {
      const int others = std::max(0, running - own);
      filter.observe(others + omp_get_max_threads() > cores, now);
      busy.store(filter.busy(), std::memory_order_relaxed);
    }
    sampling.clear(std::memory_order_release);
  }
};

Contention& contention() {
  static Contention c;
  return c;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool fork_ok() {
  Contention& c = contention();
  if (!c.enabled) return true;
  const std::int64_t now = now_ns();
  std::int64_t next = c.next_sample_ns.load(std::memory_order_relaxed);
  if (now >= next &&
      c.next_sample_ns.compare_exchange_strong(next, now + 20'000'000, std::memory_order_relaxed))
    c.sample(now);
  return !c.busy.load(std::memory_order_relaxed);
}

void init_threads_from_env() { static ThreadsFromEnv once; }

void set_num_threads(int n) {
  init_threads_from_env();
  if (n > 0) omp_set_num_threads(n);
}

int get_num_threads() {
  init_threads_from_env();
  return omp_get_max_threads();
}

}  // namespace attn
