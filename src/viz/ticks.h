// src/viz/ticks.h — internal: where axis ticks go and how they are labelled.
#pragma once

#include <string>
#include <vector>

namespace attn::viz::detail {

// Round tick values covering [lo, hi]: the smallest step of the form
// {1, 2, 2.5, 5} x 10^k that gives at most `max_ticks` ticks inside [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int max_ticks);
// Powers of ten in [lo, hi] (lo > 0); with fewer than two, 1-2-5 values instead.
std::vector<double> log_ticks(double lo, double hi, int max_ticks);
// The labels of `ticks`, all with the fewest decimals that tell them apart
// exactly ("0", "0.25", "0.5" -> "0.00", "0.25", "0.50"); a true minus sign.
std::vector<std::string> format_ticks(const std::vector<double>& ticks);
// "10⁻³" style labels when every tick is a power of ten; otherwise (1-2-5
// ticks of a short range) all as format_ticks.
std::vector<std::string> format_log_ticks(const std::vector<double>& ticks);
// The smallest integer step from 1, 2, 5, 10, 20, 50, ... with step * spacing >= min_gap.
int index_tick_step(double spacing, double min_gap);

}  // namespace attn::viz::detail
