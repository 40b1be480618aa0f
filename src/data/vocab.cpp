#include "attn/data/vocab.h"

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "attn/core/error.h"

namespace attn::data {

Vocab::Vocab(const std::vector<Tokens>& lines, int min_freq,
             const std::vector<std::string>& reserved) {
  // Count in first-seen order.
  std::unordered_map<std::string, std::size_t> slot;
  std::vector<std::pair<std::string, std::int64_t>> counts;
  for (const auto& line : lines)
    for (const auto& tok : line) {
      auto [it, fresh] = slot.emplace(tok, counts.size());
      if (fresh) counts.emplace_back(tok, 0);
      ++counts[it->second].second;
    }
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> tokens = {"<unk>"};
  tokens.insert(tokens.end(), reserved.begin(), reserved.end());
  *this = from_tokens(tokens);
  for (const auto& [tok, freq] : counts) {
    if (freq < min_freq) break;
    if (token_to_idx_.count(tok)) continue;
    token_to_idx_.emplace(tok, static_cast<std::int64_t>(idx_to_token_.size()));
    idx_to_token_.push_back(tok);
  }
}

Vocab Vocab::from_tokens(std::vector<std::string> tokens) {
  Vocab v;
  v.idx_to_token_ = std::move(tokens);
  for (std::size_t i = 0; i < v.idx_to_token_.size(); ++i) {
    bool fresh = v.token_to_idx_.emplace(v.idx_to_token_[i], static_cast<std::int64_t>(i)).second;
    ATTN_CHECK(fresh, ValueError, "Vocab: token '{}' appears twice (index {})", v.idx_to_token_[i],
               i);
  }
  return v;
}

std::int64_t Vocab::operator[](const std::string& token) const {
  auto it = token_to_idx_.find(token);
  return it == token_to_idx_.end() ? unk() : it->second;
}

std::vector<std::int64_t> Vocab::indices(const Tokens& tokens) const {
  std::vector<std::int64_t> out;
  out.reserve(tokens.size());
  for (const auto& t : tokens) out.push_back((*this)[t]);
  return out;
}

const std::string& Vocab::token(std::int64_t index) const {
  ATTN_CHECK(index >= 0 && index < static_cast<std::int64_t>(size()), ValueError,
             "Vocab: index {} is out of range for a vocabulary of {} tokens", index, size());
  return idx_to_token_[index];
}

std::vector<std::string> Vocab::to_tokens(const std::vector<std::int64_t>& indices) const {
  std::vector<std::string> out;
  for (auto i : indices) out.push_back(token(i));
  return out;
}

void Vocab::save(const std::string& path) const {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    ATTN_CHECK(f.good(), IOError, "Vocab::save: cannot write '{}'", path);
    for (const auto& t : idx_to_token_) f << t << '\n';
    f.flush();
    ATTN_CHECK(f.good(), IOError, "Vocab::save: cannot write '{}'", path);
  }
  ATTN_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, IOError,
             "Vocab::save: cannot rename '{}' to '{}'", tmp, path);
}

Vocab Vocab::load(const std::string& path) {
  std::string text = read_text_file(path);
  check_utf8(text, path);
  ATTN_CHECK(text.back() == '\n', IOError, "'{}': truncated vocabulary (no final newline)", path);
  std::vector<std::string> tokens;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    tokens.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  ATTN_CHECK(!tokens.empty() && tokens[0] == "<unk>", IOError,
             "'{}': a vocabulary must start with <unk>", path);
  try {
    return from_tokens(std::move(tokens));
  } catch (const ValueError& e) {
    throw IOError(fmt::format("'{}': {}", path, e.what()));
  }
}

}  // namespace attn::data
