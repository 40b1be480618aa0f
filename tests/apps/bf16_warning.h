// tests/apps/bf16_warning.h — what the CLI says of --precision bf16 on a CPU
// whose bf16 dot products are slower than its f32 FMAs
// (apps/attn/precision_flag.cpp), for tests that check stderr.
#pragma once

#include <string>

#include "attn/ops/precision.h"

namespace attn::testing {

// `err` is that warning, one line, whatever the measured figure.
inline bool is_slow_bf16_warning(const std::string& err) {
  const std::string head = "attn: warning: --precision bf16: this CPU's bf16 dot products make ";
  const std::string tail =
      "x the multiply-adds per second of its f32 FMAs (measured; no AMX), so bf16 runs slower "
      "than f32 here\n";
  return err.size() > head.size() + tail.size() && err.compare(0, head.size(), head) == 0 &&
         err.compare(err.size() - tail.size(), tail.size(), tail) == 0 &&
         err.find('\n') == err.size() - 1;
}

// What stderr must be for a run asked for bf16 (`asks_bf16`) or not, where
// nothing else may be said: empty, or that one warning where it applies
// (bf16_slower_than_f32(): the CLI's rule. The rate it rests on is measured
// anew in each process; on the CPUs seen it sits far from 1, 0.49-0.55 on
// an Intel Xeon without AMX).
inline bool is_quiet_but_for_slow_bf16(const std::string& err, bool asks_bf16) {
  if (asks_bf16 && bf16_slower_than_f32()) return is_slow_bf16_warning(err);
  return err.empty();
}

}  // namespace attn::testing
