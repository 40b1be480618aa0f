#include "attn/data/vocab.h"

#include <algorithm>

#include "attn/core/error.h"
#include "attn/io/atomic_file.h"

namespace attn::data {

namespace {
const std::string kUnk = "<unk>";
}  // namespace

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
  std::vector<std::string> tokens = {kUnk};
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
  auto unk = v.token_to_idx_.find(kUnk);
  ATTN_CHECK(unk != v.token_to_idx_.end(), ValueError,
             "Vocab: the token <unk> is missing (unknown words map to it)");
  v.unk_ = unk->second;
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

std::string Vocab::to_text() const {
  std::string out;
  for (std::size_t i = 0; i < idx_to_token_.size(); ++i) {
    ATTN_CHECK(idx_to_token_[i].find('\n') == std::string::npos, ValueError,
               "Vocab: token {} holds a newline and cannot be saved", i);
    out += idx_to_token_[i];
    out += '\n';
  }
  return out;
}

void Vocab::save(const std::string& path) const { io::write_file_atomic(path, to_text()); }

Vocab Vocab::load(const std::string& path, const std::vector<std::string>& required) {
  return parse(read_text_file(path), quote_path(path), required);
}

Vocab Vocab::parse(std::string_view text, std::string_view what,
                   const std::vector<std::string>& required) {
  ATTN_CHECK(!text.empty(), IOError, "{} is empty", what);
  check_utf8(text, what);
  std::vector<std::string> tokens;
  std::unordered_map<std::string_view, std::size_t> line_of;  // token -> its line (1-based)
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    const std::size_t line = tokens.size() + 1;
    ATTN_CHECK(end != std::string_view::npos, IOError,
               "{} line {}: no final newline: truncated vocabulary?", what, line);
    std::string_view tok = text.substr(start, end - start);
    ATTN_CHECK(tok.size() <= kMaxLineBytes, IOError,
               "{} line {}: {} bytes long, more than the limit of {} bytes per token", what, line,
               tok.size(), kMaxLineBytes);
    ATTN_CHECK(line != 1 || !tok.ends_with('\r'), IOError,
               "{} line 1: ends in a carriage return (this file has Windows line endings)", what);
    auto [it, fresh] = line_of.emplace(tok, line);
    ATTN_CHECK(fresh, IOError, "{} line {}: token '{}' appears twice (first at line {})", what,
               line, printable_excerpt(tok), it->second);
    tokens.emplace_back(tok);
    start = end + 1;
  }
  ATTN_CHECK(line_of.count(kUnk), IOError,
             "{}: the token <unk> is missing (unknown words map to it)", what);
  for (const auto& r : required)
    ATTN_CHECK(line_of.count(r), IOError, "{}: the reserved token {} is missing", what, r);
  return from_tokens(std::move(tokens));
}

}  // namespace attn::data
