// core/contention.h: the adaptive thread check changes state only after
// disagreeing samples have gone on for kSettleNs, however often it samples.
#include "core/contention.h"

#include <cstdint>

#include "testing.h"

using attn::detail::ContentionFilter;

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

}  // namespace
