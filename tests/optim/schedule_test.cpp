// Learning-rate schedules (optim/schedule.h): values computed by hand.
#include "attn/optim/schedule.h"

#include <cmath>

#include "testing.h"

using namespace attn;
using namespace attn::optim;

TEST(LrSchedule, WarmupThenConstant) {
  EXPECT_DOUBLE_EQ(scheduled_lr(1e-3, 1, 4, LrSchedule::constant), 0.25e-3);
  EXPECT_DOUBLE_EQ(scheduled_lr(1e-3, 2, 4, LrSchedule::constant), 0.5e-3);
  EXPECT_DOUBLE_EQ(scheduled_lr(1e-3, 4, 4, LrSchedule::constant), 1e-3);
  EXPECT_DOUBLE_EQ(scheduled_lr(1e-3, 1000, 4, LrSchedule::constant), 1e-3);
  EXPECT_DOUBLE_EQ(scheduled_lr(5e-3, 1, 0, LrSchedule::constant), 5e-3);  // no warmup: d2l
}

TEST(LrSchedule, WarmupThenInverseSquareRoot) {
  // warmup 4000, lr 7e-4: linear to the peak at 4000, then 7e-4 * sqrt(4000 / t).
  EXPECT_DOUBLE_EQ(scheduled_lr(7e-4, 1000, 4000, LrSchedule::inverse_sqrt), 7e-4 * 0.25);
  EXPECT_DOUBLE_EQ(scheduled_lr(7e-4, 4000, 4000, LrSchedule::inverse_sqrt), 7e-4);
  EXPECT_DOUBLE_EQ(scheduled_lr(7e-4, 16000, 4000, LrSchedule::inverse_sqrt), 7e-4 * 0.5);
  EXPECT_DOUBLE_EQ(scheduled_lr(7e-4, 64000, 4000, LrSchedule::inverse_sqrt), 7e-4 * 0.25);
  // Continuous at the peak, decreasing after it.
  EXPECT_LT(scheduled_lr(1.0, 4001, 4000, LrSchedule::inverse_sqrt), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(1.0, 9, 0, LrSchedule::inverse_sqrt), 1.0 / 3);
}

TEST(LrSchedule, Names) {
  EXPECT_EQ(parse_enum<LrSchedule>("inverse-sqrt"), LrSchedule::inverse_sqrt);
  EXPECT_STREQ(enum_name(LrSchedule::constant), "constant");
  EXPECT_THROW(parse_enum<LrSchedule>("cosine"), ValueError);
  EXPECT_THROW(scheduled_lr(1.0, 0, 10, LrSchedule::constant), ValueError);
}
