#include "attn/data/corpus.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "attn/core/error.h"
#include "attn/core/rng.h"
#include "attn/data/text.h"

namespace attn::data {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<SentencePair> parse_pairs(std::string_view text, std::string_view what,
                                      std::size_t max_pairs) {
  check_utf8(text, what);
  std::vector<SentencePair> pairs;
  std::size_t line = 0, start = 0;
  while (start < text.size() && (max_pairs == 0 || pairs.size() < max_pairs)) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(start, end - start);
    ++line;
    start = end + 1;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.empty()) continue;
    const std::size_t tab = l.find('\t');
    ATTN_CHECK(tab != std::string_view::npos, IOError,
               "{} line {}: no tab between source and target: '{}'", what, line,
               printable_excerpt(l));
    const std::size_t tab2 = l.find('\t', tab + 1);
    std::string_view src = trim(l.substr(0, tab));
    std::string_view tgt =
        trim(l.substr(tab + 1, tab2 == std::string_view::npos ? tab2 : tab2 - tab - 1));
    ATTN_CHECK(!src.empty() && !tgt.empty(), IOError, "{} line {}: an empty {} sentence", what,
               line, src.empty() ? "source" : "target");
    pairs.push_back({std::string(src), std::string(tgt)});
  }
  ATTN_CHECK(!pairs.empty(), IOError, "{} holds no sentence pairs", what);
  return pairs;
}

std::vector<SentencePair> read_pairs(const std::string& path, std::size_t max_pairs) {
  // read_corpus_text stops after its lines 0..N; empty lines make the count
  // of pairs smaller than the count of lines, so read all when a cap is set
  // and cut here.
  return parse_pairs(read_corpus_text(path, 0), quote_path(path), max_pairs);
}

std::string source_key(std::string_view source) {
  std::string key;
  bool space = false;
  for (char c : source) {
    if (c == ' ' || c == '\t') {
      space = !key.empty();
      continue;
    }
    if (space) key += ' ';
    space = false;
    key += c;
  }
  return key;
}

Split split_by_source(const std::vector<SentencePair>& pairs, std::size_t valid_size,
                      std::size_t test_size, std::uint64_t seed) {
  // Groups in order of first appearance, then shuffled.
  std::unordered_map<std::string, std::size_t> group_of;
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    auto [it, fresh] = group_of.emplace(source_key(pairs[i].source), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  std::vector<std::size_t> order(groups.size());
  std::iota(order.begin(), order.end(), 0);
  Generator gen(seed ^ 0x5b1175b1175ULL);
  const std::uint64_t s = gen.seed(), off = gen.reserve(order.size());
  for (std::size_t i = order.size(); i > 1; --i) {
    std::size_t j = static_cast<std::size_t>(philox_uniform(s, off, i - 1) * static_cast<float>(i));
    if (j >= i) j = i - 1;
    std::swap(order[i - 1], order[j]);
  }
  // 0: train, 1: valid, 2: test.
  std::vector<int> part(pairs.size(), 0);
  std::size_t in_test = 0, in_valid = 0;
  for (std::size_t g : order) {
    int p = in_test < test_size ? 2 : in_valid < valid_size ? 1 : 0;
    if (p == 0) break;
    for (std::size_t i : groups[g]) part[i] = p;
    (p == 2 ? in_test : in_valid) += groups[g].size();
  }
  Split split;
  for (std::size_t i = 0; i < pairs.size(); ++i)
    (part[i] == 0 ? split.train : part[i] == 1 ? split.valid : split.test).push_back(pairs[i]);
  ATTN_CHECK(!split.train.empty(), ValueError,
             "split: no training pairs are left after {} valid and {} test pairs of {}",
             split.valid.size(), split.test.size(), pairs.size());
  return split;
}

std::string pairs_to_tsv(const std::vector<SentencePair>& pairs) {
  std::string out;
  for (const auto& p : pairs) out += p.source + '\t' + p.target + '\n';
  return out;
}

}  // namespace attn::data
