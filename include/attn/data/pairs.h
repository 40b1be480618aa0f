// attn/data/pairs.h — the part of a parallel corpus a command scores
// (`attn evaluate --pairs A-B`, attn.evaluate(pairs="A-B")), and a tokenized
// sentence as one line again.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace attn::data {

// The pairs [first, last) that "A-B" (1-based, inclusive) selects among n;
// "" selects all. ValueError "'5-2' is not a range A-B with 1 <= A <= B" or
// "1-999 goes past the 201 pairs of the data".
std::pair<std::size_t, std::size_t> pair_range(const std::string& spec, std::size_t n);

// v cut to the range pair_range gave.
template <typename T>
void keep_range(std::vector<T>& v, std::pair<std::size_t, std::size_t> r) {
  v = std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(r.first),
                     v.begin() + static_cast<std::ptrdiff_t>(r.second));
}

// The tokens joined by single spaces (the inverse of split_spaces).
std::string join_tokens(const std::vector<std::string>& tokens);

}  // namespace attn::data
