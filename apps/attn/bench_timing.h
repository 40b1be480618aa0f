// apps/attn/bench_timing.h — how `attn bench` times a call: one warm-up, then
// the median of the timed repeats.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace attn::cli {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Milliseconds of each of `repeats` calls of f, after one warm-up call; the
// median. `before` runs ahead of every call, untimed.
template <class F, class B>
double median_ms(int repeats, F f, B before) {
  before();
  f();
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    before();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(ms);
}

template <class F>
double median_ms(int repeats, F f) {
  return median_ms(repeats, f, [] {});
}

}  // namespace attn::cli
