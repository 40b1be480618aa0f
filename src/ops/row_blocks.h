// src/ops/row_blocks.h — internal: how a large product shares the threads so
// that its bits depend on its shape and the thread count only, never on the
// load.
//
// oneDNN's products split their work by the team they run on, and the split
// changes the bits: on AVX2, dnnl_sgemm splits the sums of narrow products
// between threads (64 x 1280 x 64 with A transposed, a weight gradient over
// 1,280 tokens, differed between 1 and 2 threads; with 4 threads, so did
// 4096 x 256 x 256 with B transposed, a layer's forward), and on AMX the
// matmul primitive's bf16 kernels split long sums too. attn runs products on
// the calling thread alone while other processes keep the cores busy or the
// team's cores sit far apart (fork_ok, grain_scale: attn/core/threads.h), so
// a product that oneDNN split would then give other bits, and training
// another model. Instead, a product from row_block_work() multiply-adds on is
// cut into blocks of rows that depend on its shape and the thread count
// only; oneDNN computes each block on one thread, and the blocks run on the
// team, or one after another on the calling thread while the load says so,
// with the same bits (test Matmul.SameBitsWhateverTheLoad).
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>

#include "ops/matmul_internal.h"
#include "ops/thread_limit.h"

namespace attn::detail {

// The team a product may use, as detail::product found it: `size`, the
// thread count (0: not set, OpenMP's is read); `alone`, whether the load asks
// for the calling thread alone.
struct Team {
  int size = 0;
  bool alone = false;
};
inline thread_local Team t_team;

// Sets t_team for a scope.
class TeamScope {
 public:
  explicit TeamScope(Team team) : saved_(t_team) { t_team = team; }
  ~TeamScope() { t_team = saved_; }
  TeamScope(const TeamScope&) = delete;
  TeamScope& operator=(const TeamScope&) = delete;

 private:
  Team saved_;
};

// Blocks have at least this many rows (a multiple of kBlockRowAlign, so
// that the kernels' row tiles fall the same way), one per thread at most.
inline constexpr std::int64_t kMinBlockRows = 32;
inline constexpr std::int64_t kBlockRowAlign = 16;

struct RowBlocks {
  std::int64_t count = 1, step = 0;
};

// The blocks of an M-row product of `work` multiply-adds for a team of
// `threads`: one below row_block_work().
inline RowBlocks row_blocks(std::int64_t M, std::int64_t work, int threads) {
  if (threads < 2 || work < row_block_work()) return {1, M};
  const std::int64_t n = std::clamp<std::int64_t>(M / kMinBlockRows, 1, threads);
  const std::int64_t step =
      ((M + n - 1) / n + kBlockRowAlign - 1) / kBlockRowAlign * kBlockRowAlign;
  return {(M + step - 1) / step, step};
}

// Calls block(first_row, rows) for each block of an M-row product of `work`
// multiply-adds, each under a one-thread limit (oneDNN reads it), on
// t_team's threads or, while t_team.alone (or inside a parallel region),
// one after another on the calling thread. False when a call was; the first
// exception a call throws is rethrown once every block is done.
template <class F>
bool on_row_blocks(std::int64_t M, std::int64_t work, F&& block) {
  const Team team = t_team.size > 0 ? t_team : Team{omp_get_max_threads(), false};
  const RowBlocks b = row_blocks(M, work, team.size);
  if (b.count == 1) {
    ThreadLimit one(1);
    return block(std::int64_t(0), M);
  }
  const int threads = team.alone || omp_in_parallel() ? 1 : static_cast<int>(b.count);
  std::atomic<bool> ok{true};
  std::exception_ptr error;  // the first exception of a block, rethrown here
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < b.count; ++i) {
    try {
      ThreadLimit one(1);
      const std::int64_t first = i * b.step;
      if (!block(first, std::min(b.step, M - first))) ok = false;
    } catch (...) {
#pragma omp critical(attn_row_blocks_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return ok;
}

}  // namespace attn::detail
