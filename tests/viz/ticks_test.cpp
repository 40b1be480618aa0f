// The tick arithmetic shared by the figures (src/viz/ticks.h, internal).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "viz/ticks.h"

using namespace attn::viz::detail;
using Strings = std::vector<std::string>;

namespace {

void expect_values(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "tick " << i;
}

}  // namespace

TEST(NiceTicks, UnitRangeGivesFifthsOrQuarters) {
  expect_values(nice_ticks(0, 1, 6), {0, 0.2, 0.4, 0.6, 0.8, 1});
  expect_values(nice_ticks(0, 1, 5), {0, 0.25, 0.5, 0.75, 1});
  expect_values(nice_ticks(0, 1, 3), {0, 0.5, 1});
}

TEST(NiceTicks, TicksStayInsideTheRange) {
  expect_values(nice_ticks(-2.95, 61.95, 7), {0, 10, 20, 30, 40, 50, 60});
  expect_values(nice_ticks(-1.1, 1.1, 5), {-1, -0.5, 0, 0.5, 1});
  expect_values(nice_ticks(0.013, 0.31, 4), {0.1, 0.2, 0.3});
}

TEST(NiceTicks, ZeroIsExactlyZero) {
  for (double t : nice_ticks(-0.3, 0.3, 7)) {
    if (std::abs(t) < 1e-6) {
      EXPECT_EQ(t, 0.0);
      EXPECT_FALSE(std::signbit(t));
    }
  }
}

TEST(LogTicks, PowersOfTenOrOneTwoFive) {
  expect_values(log_ticks(0.005, 7, 8), {0.01, 0.1, 1});
  expect_values(log_ticks(1, 1e8, 4), {1, 1e3, 1e6});
  expect_values(log_ticks(1.5, 9, 8), {2, 5});
}

TEST(FormatTicks, SameDecimalsForAllAndTrueMinus) {
  EXPECT_EQ(format_ticks({0, 0.25, 0.5, 0.75, 1}),
            (Strings{"0.00", "0.25", "0.50", "0.75", "1.00"}));
  EXPECT_EQ(format_ticks({0, 10, 20}), (Strings{"0", "10", "20"}));
  EXPECT_EQ(format_ticks({-1, -0.5, 0}), (Strings{"\u22121.0", "\u22120.5", "0.0"}));
}

TEST(FormatTicks, ExtremeMagnitudesUseScientificNotation) {
  EXPECT_EQ(format_ticks({0, 2e6, 4e6}), (Strings{"0", "2e+06", "4e+06"}));
  EXPECT_EQ(format_ticks({1e-4, 2e-4}), (Strings{"1e-04", "2e-04"}));
}

TEST(FormatLogTicks, SuperscriptExponents) {
  EXPECT_EQ(format_log_ticks({0.01, 1, 1000}), (Strings{"10\u207b\u00b2", "10\u2070", "10\u00b3"}));
  // Mixed with 1-2-5 ticks, a power of ten reads as a plain number too.
  EXPECT_EQ(format_log_ticks({500, 1000, 2000}), (Strings{"500", "1000", "2000"}));
  EXPECT_EQ(format_log_ticks({0.2, 0.5, 1}), (Strings{"0.2", "0.5", "1.0"}));
}

TEST(IndexTickStep, OneTwoFiveSequence) {
  EXPECT_EQ(index_tick_step(20, 16), 1);
  EXPECT_EQ(index_tick_step(14, 16), 2);
  EXPECT_EQ(index_tick_step(5, 16), 5);
  EXPECT_EQ(index_tick_step(3, 16), 10);
  EXPECT_EQ(index_tick_step(0.5, 16), 50);
}
