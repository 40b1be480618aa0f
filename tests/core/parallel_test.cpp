// core/parallel.h: every index exactly once, whatever the team; no OpenMP
// region for one thread; no worksharing shared with an outer team.
#include "core/parallel.h"

#include <omp.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
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

// run_side_by_side: both pieces run once, on two threads where a team may
// fork (else in order on the caller); an exception from either reaches the
// caller after both ran.
TEST(RunSideBySide, BothRunOnceOnTwoThreadsOrInOrder) {
  int ta = -1, tb = -1, order = 0, a_at = 0, b_at = 0;
  run_side_by_side(
      true, [&] { ta = omp_get_thread_num(); }, [&] { tb = omp_get_thread_num(); });
  if (loop_threads(true) >= 2) {
    EXPECT_NE(ta, tb);
  } else {
    EXPECT_EQ(ta, 0);
    EXPECT_EQ(tb, 0);
  }
  run_side_by_side(
      false, [&] { a_at = ++order; }, [&] { b_at = ++order; });
  EXPECT_EQ(a_at, 1);
  EXPECT_EQ(b_at, 2);
  int levels = 0;
  run_side_by_side(
      false, [&] { levels += omp_get_level(); }, [&] { levels += omp_get_level(); });
  EXPECT_EQ(levels, 0);  // no region when not side by side
}

TEST(RunSideBySide, ExceptionsReachTheCallerAfterBothRan) {
  for (bool parallel : {true, false}) {
    std::atomic<int> ran{0};
    EXPECT_THROW(run_side_by_side(
                     parallel,
                     [&] {
                       ++ran;
                       throw std::runtime_error("a");
                     },
                     [&] { ++ran; }),
                 std::runtime_error);
    // Sequentially b does not run once a threw; side by side it already has.
    if (parallel && loop_threads(true) >= 2) {
      EXPECT_EQ(ran.load(), 2);
    }
    std::atomic<int> ran_b{0};
    try {
      run_side_by_side(
          parallel, [&] {},
          [&] {
            ++ran_b;
            throw std::logic_error("b");
          });
      ADD_FAILURE() << "no exception";
    } catch (const std::logic_error& e) {
      EXPECT_STREQ(e.what(), "b");
    }
    EXPECT_EQ(ran_b.load(), 1);
  }
}
