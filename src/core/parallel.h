// src/core/parallel.h — internal: parallel loops that enter an OpenMP region
// only when it will run on more than one thread.
//
// A region whose if clause is false still runs, as a team of one: libgomp
// sets the team up and wakes its barrier at the end with a futex system call
// (1.2 us each on the development machine, a virtual one). A small model's
// step runs hundreds of ops below the parallel grain (d2l's Transformer: about
// 250 in a one-sentence translation, 170 in a training step), so those
// regions cost as much as the arithmetic. The loops below run serially on the
// calling thread instead, with the same results: every loop given to them
// writes disjoint elements per index.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <exception>

#include "attn/core/threads.h"

namespace attn::detail {

// The threads a loop may use: the team's size where `parallel` holds, the
// caller is not already inside an active parallel region (where a nested
// region would be a team of one) and no other process holds the cores
// (fork_ok, attn/core/threads.h), else 1.
inline int loop_threads(bool parallel) {
  return parallel && !omp_in_parallel() && fork_ok() ? omp_get_max_threads() : 1;
}

// f(i) for every i in [0, n): split statically over `threads` threads
// (schedule(static)), or all on the calling thread when threads <= 1.
template <class F>
void parallel_for(std::int64_t n, int threads, F&& f) {
  if (threads > 1 && n > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t i = 0; i < n; ++i) f(i);
  } else {
    for (std::int64_t i = 0; i < n; ++i) f(i);
  }
}

// f(begin, end) over contiguous parts of [0, n), one per thread of a team of
// `threads` (none empty), or f(0, n) on the calling thread.
template <class F>
void parallel_ranges(std::int64_t n, int threads, F&& f) {
  if (threads > 1 && n > 1) {
#pragma omp parallel num_threads(threads)
    {
      const std::int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const std::int64_t chunk = (n + nt - 1) / nt, b = t * chunk, e = std::min(n, b + chunk);
      if (b < e) f(b, e);
    }
  } else if (n > 0) {
    f(0, n);
  }
}

// a() and b() side by side, one on each thread of a team of two, where
// `parallel` holds and loop_threads allows a team; else a() then b() on the
// calling thread. For two independent pieces of work each too small to fork
// a team of its own (the two products of a small layer's backward). Each runs
// inside the region, so the ops it calls stay on their thread; an exception
// from either is rethrown here once both have ended (a's first).
template <class A, class B>
void run_side_by_side(bool parallel, A&& a, B&& b) {
  if (!parallel || loop_threads(true) < 2) {
    a();
    b();
    return;
  }
  std::exception_ptr ea, eb;
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    if (t == 0) {
      try {
        a();
      } catch (...) {
        ea = std::current_exception();
      }
    }
    if (t == 1 || omp_get_num_threads() == 1) {  // a team of one runs both
      try {
        b();
      } catch (...) {
        eb = std::current_exception();
      }
    }
  }
  if (ea) std::rethrow_exception(ea);
  if (eb) std::rethrow_exception(eb);
}

}  // namespace attn::detail
