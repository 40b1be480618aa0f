#include "ticks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace attn::viz::detail {

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  if (!(hi > lo)) return {lo};
  max_ticks = std::max(max_ticks, 2);
  const double raw = (hi - lo) / max_ticks;
  double base = std::pow(10.0, std::floor(std::log10(raw)));
  static constexpr double kMantissas[] = {1, 2, 2.5, 5, 10};
  for (int attempt = 0; attempt < 4; ++attempt, base *= 10) {
    for (double m : kMantissas) {
      const double step = m * base;
      const double eps = 1e-9;
      const double first = std::ceil(lo / step - eps);
      const double last = std::floor(hi / step + eps);
      if (last - first + 1 > max_ticks) continue;
      std::vector<double> ticks;
      for (double i = first; i <= last; i += 1) {
        double v = i * step;
        if (std::fabs(v) < step * 1e-9) v = 0;
        ticks.push_back(v);
      }
      return ticks;
    }
  }
  return {lo, hi};
}

std::vector<double> log_ticks(double lo, double hi, int max_ticks) {
  if (!(lo > 0) || !(hi > lo)) return {lo};
  const double eps = 1e-9;
  const int e0 = static_cast<int>(std::ceil(std::log10(lo) - eps));
  const int e1 = static_cast<int>(std::floor(std::log10(hi) + eps));
  if (e1 - e0 + 1 >= 2) {
    const int n = e1 - e0 + 1;
    const int every = (n + max_ticks - 1) / std::max(max_ticks, 1);
    std::vector<double> ticks;
    for (int e = e0; e <= e1; ++e)
      if ((e - e0) % every == 0) ticks.push_back(std::pow(10.0, e));
    return ticks;
  }
  // Less than two decades visible: 1-2-5 values, else plain linear ticks.
  std::vector<double> ticks;
  for (int e = e0 - 1; e <= e1 + 1; ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      double v = m * std::pow(10.0, e);
      if (v >= lo * (1 - eps) && v <= hi * (1 + eps)) ticks.push_back(v);
    }
  if (ticks.size() >= 2 && static_cast<int>(ticks.size()) <= max_ticks) return ticks;
  return nice_ticks(lo, hi, max_ticks);
}

namespace {

std::string with_true_minus(std::string s) {
  if (!s.empty() && s[0] == '-') s.replace(0, 1, "\u2212");
  return s;
}

std::string superscript(int e) {
  static const char* kDigits[] = {"\u2070", "\u00b9", "\u00b2", "\u00b3", "\u2074",
                                  "\u2075", "\u2076", "\u2077", "\u2078", "\u2079"};
  std::string out = e < 0 ? "\u207b" : "";
  for (char c : std::to_string(std::abs(e))) out += kDigits[c - '0'];
  return out;
}

}  // namespace

std::vector<std::string> format_ticks(const std::vector<double>& ticks) {
  double largest = 0;
  for (double t : ticks) largest = std::max(largest, std::fabs(t));
  std::vector<std::string> out;
  if (largest >= 1e6 || (largest > 0 && largest < 1e-3)) {
    // Scientific, with enough digits to tell the ticks apart.
    for (int digits = 0; digits <= 6; ++digits) {
      out.clear();
      bool distinct = true;
      for (double t : ticks) {
        out.push_back(with_true_minus(t == 0 ? "0" : fmt::format("{:.{}e}", t, digits)));
        if (out.size() >= 2 && out[out.size() - 1] == out[out.size() - 2]) distinct = false;
      }
      if (distinct) break;
    }
    return out;
  }
  int decimals = 0;
  for (; decimals < 8; ++decimals) {
    const double scale = std::pow(10.0, decimals);
    bool exact = true;
    for (double t : ticks)
      if (std::fabs(std::round(t * scale) / scale - t) > 1e-9 * std::max(1.0, std::fabs(t)))
        exact = false;
    if (exact) break;
  }
  for (double t : ticks) {
    std::string s = fmt::format("{:.{}f}", t, decimals);
    if (std::strtod(s.c_str(), nullptr) == 0 && s[0] == '-') s.erase(0, 1);  // no "-0.0"
    out.push_back(with_true_minus(s));
  }
  return out;
}

std::vector<std::string> format_log_ticks(const std::vector<double>& ticks) {
  auto power_of_ten = [](double t) {
    return t > 0 && std::fabs(std::log10(t) - std::round(std::log10(t))) < 1e-9;
  };
  // 1-2-5 ticks (a short range) read as plain numbers: "500, 1000, 2000",
  // not "500, 10³, 2000".
  if (!std::all_of(ticks.begin(), ticks.end(), power_of_ten)) return format_ticks(ticks);
  std::vector<std::string> out;
  for (double t : ticks)
    out.push_back("10" + superscript(static_cast<int>(std::round(std::log10(t)))));
  return out;
}

int index_tick_step(double spacing, double min_gap) {
  if (spacing <= 0) return 1;
  for (long step = 1;; step *= 10) {
    for (long m : {1L, 2L, 5L}) {
      if (static_cast<double>(m * step) * spacing >= min_gap) return static_cast<int>(m * step);
    }
    if (step > 100000000L) return static_cast<int>(step);
  }
}

}  // namespace attn::viz::detail
