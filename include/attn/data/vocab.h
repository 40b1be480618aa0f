// attn/data/vocab.h — d2l's Vocab: token <-> index.
//
// A vocabulary built from a corpus is d2l 0.17's: index 0 is "<unk>", then
// the reserved tokens in order, then every token with frequency >= min_freq,
// most frequent first; ties keep the order in which the tokens were first
// seen (Python's Counter + stable sort, as d2l). A vocabulary read from a
// file may hold "<unk>" at any index (d2l 1.0 sorts its tokens, so "<unk>"
// lands wherever it sorts): unknown words map to that index.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "attn/data/text.h"

namespace attn::data {

class Vocab {
 public:
  Vocab() = default;
  Vocab(const std::vector<Tokens>& lines, int min_freq, const std::vector<std::string>& reserved);
  // A vocabulary from its tokens in index order (as saved by save()).
  // ValueError for a token given twice or a missing "<unk>".
  static Vocab from_tokens(std::vector<std::string> tokens);

  std::size_t size() const { return idx_to_token_.size(); }
  // Index of a token; unknown tokens map to unk().
  std::int64_t operator[](const std::string& token) const;
  std::vector<std::int64_t> indices(const Tokens& tokens) const;
  const std::string& token(std::int64_t index) const;
  std::vector<std::string> to_tokens(const std::vector<std::int64_t>& indices) const;
  const std::vector<std::string>& tokens() const { return idx_to_token_; }
  // The index of "<unk>" (0 in a vocabulary built by attn or d2l 0.17).
  std::int64_t unk() const { return unk_; }

  // The vocabulary file's text: one token per line, in index order, each line
  // ending in '\n'. ValueError for a token that holds a '\n' (it could not be
  // read back).
  std::string to_text() const;
  // to_text(), written atomically.
  void save(const std::string& path) const;

  // Reads a vocabulary file (plain or gzip). IOError naming the file (and the
  // line) for a missing or empty file, invalid UTF-8, a missing final newline,
  // a line longer than kMaxLineBytes, Windows line ends (a first line ending
  // in '\r'), a duplicate token, "<unk>" missing, or a token of `required`
  // (e.g. kReservedTokens) missing. A token may be the empty string: an
  // empty line.
  static Vocab load(const std::string& path, const std::vector<std::string>& required = {});
  // The same from the file's text; `what` names it in errors.
  static Vocab parse(std::string_view text, std::string_view what,
                     const std::vector<std::string>& required = {});

 private:
  std::vector<std::string> idx_to_token_;
  std::unordered_map<std::string, std::int64_t> token_to_idx_;
  std::int64_t unk_ = 0;
};

}  // namespace attn::data
