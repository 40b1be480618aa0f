// src/ops/thread_limit.h — internal: OpenMP's thread count of the calling
// thread (which oneDNN reads) for a scope.
#pragma once

#include <omp.h>

namespace attn::detail {

class ThreadLimit {
 public:
  explicit ThreadLimit(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ThreadLimit() { omp_set_num_threads(saved_); }
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int saved_;
};

}  // namespace attn::detail
