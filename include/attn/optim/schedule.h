// attn/optim/schedule.h — learning-rate schedules.
//
//   constant:      lr_t = lr * min(1, t / warmup)
//   inverse-sqrt:  lr_t = lr * min(t / warmup, sqrt(warmup / t))
//
// t counts optimizer steps from 1 (the step about to be taken). Both ramp up
// linearly over the first `warmup` steps (none when warmup is 0); the
// inverse square root then decays from lr at t = warmup, as in "Attention Is
// All You Need" (Vaswani et al. 2017, section 5.3) with lr in place of
// d_model^-0.5 * warmup^-0.5, and as Marian's --lr-decay-inv-sqrt.
#pragma once

#include <cstdint>
#include <string>

#include "attn/core/enum_names.h"

namespace attn::optim {

enum class LrSchedule { constant, inverse_sqrt };

}  // namespace attn::optim

template <>
struct attn::EnumNames<attn::optim::LrSchedule> {
  static constexpr const char* what = "lr schedule";
  static constexpr std::array<const char*, 2> names{"constant", "inverse-sqrt"};
};

namespace attn::optim {

// Its names, "constant" and "inverse-sqrt", are EnumNames<LrSchedule>'s
// (enum_name, parse_enum).

double scheduled_lr(double lr, std::int64_t step, std::int64_t warmup, LrSchedule schedule);

}  // namespace attn::optim
