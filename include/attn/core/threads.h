// attn/core/threads.h — one thread setting for attn and oneDNN (both OpenMP).
//
// The number of threads comes from ATTN_NUM_THREADS when set, else from
// OpenMP's default (OMP_NUM_THREADS or the number of cores).
#pragma once

#include <cstdint>

namespace attn {

void set_num_threads(int n);
// Reads ATTN_NUM_THREADS (once). Called when the first tensor is allocated,
// so a program that never calls set_num_threads still honours it.
void init_threads_from_env();
int get_num_threads();

// Work below this many elements runs on one thread: forking costs more.
inline constexpr std::int64_t kParallelGrain = 32768;

}  // namespace attn
