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
// Ops compare their work with parallel_grain(), this times grain_scale().
inline constexpr std::int64_t kParallelGrain = 32768;

// Whether an op big enough to fork (above its grain) should fork now: false
// while other processes keep the cores busy. An OpenMP team needs all its
// threads on a core at once; when another process holds one, every fork
// waits for the scheduler to give the worker its turn, and d2l's toy
// training ran 3-4x slower with one busy process beside it. attn's ops and
// its matrix products then run on the calling thread. Every op gated by this
// splits its work the same way whatever the team, so results do not change
// (oneDNN's products are cut into row blocks of their own: test
// Matmul.SameBitsWhateverTheLoad; batches of large products and products on
// packed weights keep the team). The state is
// sampled at most every 20 ms: the machine's runnable tasks (/proc/loadavg)
// less this process's own (/proc/self/task), added to attn's thread count,
// against the cores; the state changes once samples that disagree with it
// have gone on for 40 ms (two samples at least, three at the 20 ms rate).
// ATTN_ADAPTIVE_THREADS=0 turns it off (always fork).
bool fork_ok();

// The factor by which every work threshold for forking a team is multiplied
// (parallel_grain() and the ops' own thresholds): 1, or kFarGrainScale while
// the team's threads sit on cores far apart. A virtual machine's cores may be
// placed by its host on cores that share a cache or not, and that can change
// while a program runs: on the development machine a round trip between two
// threads took 80-160 ns or 370-480 ns, for seconds to minutes, and with
// the slow placement d2l's toy training ran slower on two threads than on
// one (each fork and the data its ops hand over cross between the cores).
// On an Intel Xeon VM it took 190-310 ns all day, and there the toy trained
// 10% faster with small ops forked (scale 1) than without (16): so far
// means above kFarRoundTripNs, between that 310 and the 370 above.
// Without AVX-512 an op's elements take longer (vectors half as wide or
// less), so a fork pays for a longer trip, and the factor grows only above
// kFarRoundTripNsNoAvx512: on an AMD EPYC Zen 1 (AVX2, 128-bit FMA units)
// the trips were 150-240 and 350-380 ns, and in the second placement d2l's
// toy training made 28,000-29,000 tokens/s at factor 1 against 19,700-24,800
// at 16 (5 alternating pairs of runs far in most probes). The placement
// itself (placement_probes) is far above kFarRoundTripNs on every CPU.
// Measured (detail::team_round_trip_ns, src/core/contention.h) when a team
// is about to be needed, at most every kProbeEveryNs, while no other process
// holds the cores. Only the thread count of small ops changes, never the
// results (as with fork_ok). ATTN_GRAIN_SCALE=N (1-1024) fixes the factor at
// N; ATTN_ADAPTIVE_THREADS=0 fixes it at 1.
inline constexpr std::int64_t kFarGrainScale = 16;
inline constexpr std::int64_t kFarRoundTripNs = 340;
inline constexpr std::int64_t kFarRoundTripNsNoAvx512 = 2 * kFarRoundTripNs;
inline constexpr std::int64_t kProbeEveryNs = 1'000'000'000;
std::int64_t grain_scale();
inline std::int64_t parallel_grain() { return kParallelGrain * grain_scale(); }

// The placement probes this process has made so far (above): how many, and
// how many found the team's cores far apart. A run's speed depends on the
// placement (d2l's toy training: about 150,000 target tokens/s near, 95,000
// far, on the development machine), so `attn train --metrics-json` reports
// both and the benchmark scripts print them beside each run.
struct PlacementProbes {
  std::int64_t probes = 0;
  std::int64_t far = 0;
};
PlacementProbes placement_probes();

}  // namespace attn
