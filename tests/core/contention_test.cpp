// core/contention.h: the adaptive thread check changes state only after
// disagreeing samples have gone on for kSettleNs, however often it samples;
// the team's round trip is measured where it can be, and -1 where not.
#include "core/contention.h"

#include <omp.h>

#include <cstdint>

#include "attn/core/threads.h"
#include "testing.h"

using attn::detail::ContentionFilter;
using attn::detail::grain_scale_for_trip;
using attn::detail::parse_grain_scale;
using attn::detail::team_round_trip_ns;

namespace {

constexpr std::int64_t kMs = 1'000'000;

TEST(ContentionFilter, StartsIdle) {
  ContentionFilter f;
  EXPECT_FALSE(f.busy());
}

// Samples every 20 ms (training): the third busy sample in a row switches.
TEST(ContentionFilter, FrequentSamplesSwitchOnTheThird) {
  ContentionFilter f;
  f.observe(true, 0);
  EXPECT_FALSE(f.busy());
  f.observe(true, 20 * kMs);
  EXPECT_FALSE(f.busy());
  f.observe(true, 40 * kMs);
  EXPECT_TRUE(f.busy());
  // And back the same way.
  f.observe(false, 60 * kMs);
  f.observe(false, 80 * kMs);
  EXPECT_TRUE(f.busy());
  f.observe(false, 100 * kMs);
  EXPECT_FALSE(f.busy());
}

// A passing task: one or two busy samples within the settling time change nothing.
TEST(ContentionFilter, ShortBurstChangesNothing) {
  ContentionFilter f;
  f.observe(true, 0);
  f.observe(true, 39 * kMs);
  EXPECT_FALSE(f.busy());
  f.observe(false, 45 * kMs);  // agrees: the run ends
  f.observe(true, 60 * kMs);
  EXPECT_FALSE(f.busy());
  f.observe(true, 90 * kMs);  // 30 ms into the new run
  EXPECT_FALSE(f.busy());
}

// Samples 200 ms apart (one per call of a long kernel): two samples suffice
// in both directions, where a count of three kept one thread for a call more.
TEST(ContentionFilter, SparseSamplesSwitchOnTheSecond) {
  ContentionFilter f;
  f.observe(true, 0);
  EXPECT_FALSE(f.busy());
  f.observe(true, 200 * kMs);
  EXPECT_TRUE(f.busy());
  f.observe(false, 400 * kMs);
  EXPECT_TRUE(f.busy());
  f.observe(false, 600 * kMs);
  EXPECT_FALSE(f.busy());
}

// Agreeing samples keep the state and forget any earlier disagreement.
TEST(ContentionFilter, AgreeingSampleResetsTheRun) {
  ContentionFilter f;
  f.observe(true, 0);
  f.observe(false, 30 * kMs);
  f.observe(true, 50 * kMs);
  f.observe(true, 80 * kMs);  // 30 ms since this run began, not 80
  EXPECT_FALSE(f.busy());
  f.observe(true, 90 * kMs);
  EXPECT_TRUE(f.busy());
}

TEST(TeamRoundTrip, NoTeamNoMeasure) {
  EXPECT_EQ(team_round_trip_ns(1), -1);
  EXPECT_EQ(team_round_trip_ns(0), -1);
  // Inside a parallel region a nested team would be a team of one.
  std::int64_t inside[2] = {0, 0};
#pragma omp parallel num_threads(2)
  inside[omp_get_thread_num()] = team_round_trip_ns(2);
  EXPECT_EQ(inside[0], -1);
  EXPECT_EQ(inside[1], -1);
}

// A team of two answers: with a budget far beyond any scheduling delay (the
// partner thread may wait for a core while other processes hold both), the
// probe measures a round trip. Nothing here is timed against a deadline:
// the budget only ends a probe whose partner never runs at all.
TEST(TeamRoundTrip, TwoThreadsAnswer) {
  constexpr std::int64_t kGenerousNs = 120'000'000'000;  // 2 minutes
  const std::int64_t trip = team_round_trip_ns(2, kGenerousNs);
  EXPECT_GT(trip, 0);
}

// Small ops fork at factor 1 up to the line of the CPU's vector width, at
// kFarGrainScale beyond it; the line without AVX-512 is twice as far.
TEST(GrainScale, FromTheRoundTripAndTheVectorWidth) {
  using attn::kFarGrainScale;
  using attn::kFarRoundTripNs;
  using attn::kFarRoundTripNsNoAvx512;
  EXPECT_GT(kFarRoundTripNsNoAvx512, kFarRoundTripNs);
  for (const bool avx512 : {true, false}) {
    const std::int64_t line = avx512 ? kFarRoundTripNs : kFarRoundTripNsNoAvx512;
    EXPECT_EQ(grain_scale_for_trip(80, avx512), 1) << avx512;
    EXPECT_EQ(grain_scale_for_trip(line, avx512), 1) << avx512;
    EXPECT_EQ(grain_scale_for_trip(line + 1, avx512), kFarGrainScale) << avx512;
    EXPECT_EQ(grain_scale_for_trip(5000, avx512), kFarGrainScale) << avx512;
  }
  // The Zen 1's far placement (350-380 ns): coarse with AVX-512 only.
  EXPECT_EQ(grain_scale_for_trip(370, true), kFarGrainScale);
  EXPECT_EQ(grain_scale_for_trip(370, false), 1);
}

TEST(GrainScale, ParsesOnlyWholeNumbersInRange) {
  EXPECT_EQ(parse_grain_scale(nullptr), 0);
  EXPECT_EQ(parse_grain_scale("1"), 1);
  EXPECT_EQ(parse_grain_scale("16"), 16);
  EXPECT_EQ(parse_grain_scale("1024"), 1024);
  for (const char* bad : {"", "0", "-4", "1025", "16x", "x", "2.5", " "})
    EXPECT_EQ(parse_grain_scale(bad), 0) << bad;
}

}  // namespace
