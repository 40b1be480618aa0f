#include "attn/data/pairs.h"

#include <cstdio>

#include "attn/core/error.h"

namespace attn::data {

std::pair<std::size_t, std::size_t> pair_range(const std::string& spec, std::size_t n) {
  if (spec.empty()) return {0, n};
  std::size_t a = 0, b = 0;
  char dash = 0, extra = 0;
  ATTN_CHECK(std::sscanf(spec.c_str(), "%zu%c%zu%c", &a, &dash, &b, &extra) == 3 && dash == '-' &&
                 a >= 1 && b >= a,
             ValueError, "'{}' is not a range A-B with 1 <= A <= B", spec);
  ATTN_CHECK(b <= n, ValueError, "{} goes past the {} pairs of the data", spec, n);
  return {a - 1, b};
}

std::string join_tokens(const std::vector<std::string>& tokens) {
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
  return out;
}

}  // namespace attn::data
