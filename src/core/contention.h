// src/core/contention.h — internal: the decision rule of the adaptive thread
// check (fork_ok, attn/core/threads.h), apart from how it samples the machine.
//
// Each sample says whether other processes' runnable tasks and attn's team
// outnumber the cores ("busy"). A sample that disagrees with the current
// state changes nothing by itself: a passing task (a kernel thread, a shell
// command) must not halve attn's threads. The state changes once samples
// that disagree with it have gone on for kSettleNs: a disagreeing sample at
// least that long after the first of an unbroken run of them. A sample that
// agrees ends the run.
//
// The rule counts time, not samples, because samples are taken only when
// attn is about to fork a team, at most every 20 ms. Training forks every
// few microseconds, so samples come every 20 ms and the state changes on the
// third (0, 20, 40 ms), as it did when three samples in a row were required.
// A long fused kernel forks once per call, 100-300 ms apart: there a count of
// three samples kept attn on one thread for three calls after a short-lived
// neighbour (a pipe's reader starting up) had gone; now it takes two.
#pragma once

#include <cstdint>

namespace attn::detail {

class ContentionFilter {
 public:
  static constexpr std::int64_t kSettleNs = 40'000'000;

  // One sample taken at `now_ns` (a monotonic clock).
  void observe(bool busy_now, std::int64_t now_ns) {
    if (busy_now == busy_) {
      run_start_ns_ = kNoRun;
      return;
    }
    if (run_start_ns_ == kNoRun) {
      run_start_ns_ = now_ns;
      return;
    }
    if (now_ns - run_start_ns_ >= kSettleNs) {
      busy_ = busy_now;
      run_start_ns_ = kNoRun;
    }
  }

  bool busy() const { return busy_; }

 private:
  static constexpr std::int64_t kNoRun = INT64_MIN;
  bool busy_ = false;
  std::int64_t run_start_ns_ = kNoRun;  // first sample of the current disagreement
};

// The round trip between the threads of an OpenMP team of `threads` (thread
// 0 and each other thread in turn, kProbeTrips round trips: the median of
// each pair, the largest over the pairs), in ns; -1 where it could not be
// measured: a team of fewer than two threads (one asked, or inside a
// parallel region), or a probe not done within kProbeBudgetNs of its start
// (the team's threads being created, or another process holding a core).
// Threads on cores that share a cache answer in 80-110 ns on the
// development machine (a virtual one); when the host puts them on cores
// apart, in about 400 ns (the least of 16 trips there was 210-370 ns, so
// the median, not the least).
inline constexpr int kProbeTrips = 16;
inline constexpr std::int64_t kProbeBudgetNs = 1'000'000;
std::int64_t team_round_trip_ns(int threads, std::int64_t budget_ns = kProbeBudgetNs);

// grain_scale() after a probe that measured `trip_ns` (attn/core/threads.h):
// kFarGrainScale above kFarRoundTripNs on a CPU with AVX-512 (`avx512`), above
// kFarRoundTripNsNoAvx512 on one without; else 1.
std::int64_t grain_scale_for_trip(std::int64_t trip_ns, bool avx512);

// ATTN_GRAIN_SCALE's value: N for a whole number 1 <= N <= 1024 (grain_scale()
// is then N, whatever the probe says), else 0 (unset, or not such a number:
// adaptive).
std::int64_t parse_grain_scale(const char* s);

// Fixes grain_scale() at `scale` (0: adaptive again, or ATTN_GRAIN_SCALE's
// value); returns the previous setting. For tests.
std::int64_t set_grain_scale(std::int64_t scale);

// Turns the adaptive check on or off (off: fork_ok() is true and
// grain_scale() 1 unless fixed, as with ATTN_ADAPTIVE_THREADS=0); returns the
// previous setting. For tests that need the team whatever the load.
bool set_adaptive_threads(bool on);

}  // namespace attn::detail
