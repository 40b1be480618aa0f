#include "attn/core/threads.h"

#include <omp.h>

#include <cstdlib>
#include <string>

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

}  // namespace

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
