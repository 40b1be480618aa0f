#include "attn/optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "attn/core/error.h"

namespace attn::optim {

double scheduled_lr(double lr, std::int64_t step, std::int64_t warmup, LrSchedule schedule) {
  ATTN_CHECK(step >= 1 && warmup >= 0, ValueError,
             "scheduled_lr: step must be >= 1 and warmup >= 0, got {} and {}", step, warmup);
  const double t = static_cast<double>(step);
  const double w = static_cast<double>(std::max<std::int64_t>(warmup, 1));
  switch (schedule) {
    case LrSchedule::constant: return warmup == 0 ? lr : lr * std::min(1.0, t / w);
    case LrSchedule::inverse_sqrt: return lr * std::min(t / w, std::sqrt(w / t));
  }
  return lr;
}

}  // namespace attn::optim
