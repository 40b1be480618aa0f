// core/parallel.h: every index exactly once, whatever the team; no OpenMP
// region for one thread; no worksharing shared with an outer team.
#include "core/parallel.h"

#include <omp.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "testing.h"

using namespace attn::detail;

namespace {

// How many times each index of [0, n) was visited.
std::vector<int> visits_for(std::int64_t n, int threads) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  parallel_for(n, threads, [&](std::int64_t i) { ++hits[static_cast<std::size_t>(i)]; });
  std::vector<int> out;
  for (auto& h : hits) out.push_back(h.load());
  return out;
}

std::vector<int> visits_ranges(std::int64_t n, int threads, int* calls) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  std::atomic<int> parts{0};
  parallel_ranges(n, threads, [&](std::int64_t b, std::int64_t e) {
    EXPECT_LT(b, e);
    ++parts;
    for (std::int64_t i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
  });
  *calls = parts.load();
  std::vector<int> out;
  for (auto& h : hits) out.push_back(h.load());
  return out;
}

}  // namespace

TEST(ParallelFor, EveryIndexOnceForAnyTeam) {
  for (int threads : {0, 1, 2, 3})
    for (std::int64_t n : {0, 1, 2, 7, 1000}) {
      SCOPED_TRACE(testing::Message() << "threads " << threads << ", n " << n);
      EXPECT_EQ(visits_for(n, threads), std::vector<int>(static_cast<std::size_t>(n), 1));
      int calls = 0;
      EXPECT_EQ(visits_ranges(n, threads, &calls),
                std::vector<int>(static_cast<std::size_t>(n), 1));
      EXPECT_LE(calls, threads > 1 ? threads : 1);
      if (n == 0)
        EXPECT_EQ(calls, 0);
      else
        EXPECT_GE(calls, 1);
    }
}

// One thread: the body runs on the caller, outside any region (a region of
// one thread would still cost libgomp a futex call).
TEST(ParallelFor, OneThreadEntersNoRegion) {
  int levels = 0;
  parallel_for(5, 1, [&](std::int64_t) { levels += omp_get_level(); });
  EXPECT_EQ(levels, 0);
  parallel_ranges(5, 1, [&](std::int64_t, std::int64_t) { levels += omp_get_level(); });
  EXPECT_EQ(levels, 0);
  EXPECT_EQ(loop_threads(false), 1);
  EXPECT_EQ(loop_threads(true), omp_get_max_threads());
}

TEST(ParallelFor, TwoThreadsRunInARegion) {
  std::atomic<int> in_region{0};
  parallel_for(8, 2, [&](std::int64_t) { in_region += omp_get_level() == 1; });
  EXPECT_EQ(in_region.load(), 8);
}

// Inside another team's region a loop runs whole on each of that team's
// threads: loop_threads says 1, and nothing is shared with the outer team.
TEST(ParallelFor, InsideAnActiveRegionEachCallerRunsTheWholeLoop) {
  std::atomic<int> total{0}, inner_threads{0};
#pragma omp parallel num_threads(2)
  {
    const int threads = loop_threads(true);
    if (omp_in_parallel()) inner_threads += threads;
    parallel_for(10, threads, [&](std::int64_t) { ++total; });
  }
  const int team = omp_get_max_threads() > 1 ? 2 : 1;
  EXPECT_EQ(total.load(), 10 * team);
  if (team > 1) {
    EXPECT_EQ(inner_threads.load(), team);  // 1 each
  }
}
