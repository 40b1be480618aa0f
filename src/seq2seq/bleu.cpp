#include "attn/seq2seq/bleu.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "attn/core/error.h"

namespace attn::seq2seq {
namespace {

std::map<std::vector<std::string>, int> ngrams(const data::Tokens& t, std::size_t n) {
  std::map<std::vector<std::string>, int> out;
  for (std::size_t i = 0; i + n <= t.size(); ++i)
    ++out[data::Tokens(t.begin() + i, t.begin() + i + n)];
  return out;
}

// Clipped matches of pred's n-grams against label's.
int clipped_matches(const data::Tokens& pred, const data::Tokens& label, std::size_t n) {
  auto label_subs = ngrams(label, n);
  int matches = 0;
  for (std::size_t i = 0; i + n <= pred.size(); ++i) {
    auto it = label_subs.find(data::Tokens(pred.begin() + i, pred.begin() + i + n));
    if (it != label_subs.end() && it->second > 0) {
      ++matches;
      --it->second;
    }
  }
  return matches;
}

}  // namespace

double bleu(const std::string& pred_seq, const std::string& label_seq, int k) {
  ATTN_CHECK(k >= 1, ValueError, "bleu: k must be >= 1, got {}", k);
  data::Tokens pred = data::split_spaces(pred_seq), label = data::split_spaces(label_seq);
  double len_pred = static_cast<double>(pred.size()), len_label = static_cast<double>(label.size());
  double score = std::exp(std::min(0.0, 1.0 - len_label / len_pred));
  for (int n = 1; n <= k; ++n) {
    double total = len_pred - n + 1;
    double p = total > 0 ? clipped_matches(pred, label, n) / total : 0.0;
    score *= std::pow(p, std::pow(0.5, n));
  }
  return score;
}

double corpus_bleu(const std::vector<data::Tokens>& predictions,
                   const std::vector<data::Tokens>& references, int max_n) {
  ATTN_CHECK(predictions.size() == references.size(), ValueError,
             "corpus_bleu: {} predictions for {} references", predictions.size(),
             references.size());
  ATTN_CHECK(max_n >= 1, ValueError, "corpus_bleu: max_n must be >= 1, got {}", max_n);
  std::vector<double> matches(max_n, 0), totals(max_n, 0);
  double pred_len = 0, ref_len = 0;
  for (std::size_t s = 0; s < predictions.size(); ++s) {
    pred_len += static_cast<double>(predictions[s].size());
    ref_len += static_cast<double>(references[s].size());
    for (int n = 1; n <= max_n; ++n) {
      matches[n - 1] += clipped_matches(predictions[s], references[s], n);
      totals[n - 1] += std::max(0.0, static_cast<double>(predictions[s].size()) - n + 1);
    }
  }
  double log_sum = 0;
  for (int n = 0; n < max_n; ++n) {
    if (matches[n] == 0 || totals[n] == 0) return 0.0;
    log_sum += std::log(matches[n] / totals[n]);
  }
  double bp = pred_len >= ref_len ? 1.0 : std::exp(1.0 - ref_len / std::max(pred_len, 1.0));
  return bp * std::exp(log_sum / max_n);
}

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t pos; (pos = s.find(from, start)) != std::string::npos; start = pos + from.size())
    out.append(s, start, pos - start).append(to);
  if (start == 0) return;  // nothing found
  out.append(s, start);
  s = std::move(out);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Rule 1's set: { | } ~  [ \ ] ^ _ `  space ! " # $ % &  ( ) * +  : ; < = > ? @  /
bool is_13a_symbol(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return (u >= 0x7B && u <= 0x7E) || (u >= 0x5B && u <= 0x60) || (u >= 0x20 && u <= 0x26) ||
         (u >= 0x28 && u <= 0x2B) || (u >= 0x3A && u <= 0x40) || u == 0x2F;
}

// The length in bytes of the whitespace character (as Python's str.isspace)
// that starts at s[i], or 0.
std::size_t whitespace_at(std::string_view s, std::size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
  auto byte = [&](std::size_t k) -> unsigned {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u;
  };
  if (c == 0xC2 && (byte(1) == 0x85 || byte(1) == 0xA0)) return 2;  // U+0085, U+00A0
  if (c == 0xE1 && byte(1) == 0x9A && byte(2) == 0x80) return 3;  // U+1680
  if (c == 0xE2 && byte(1) == 0x80 &&
      (byte(2) <= 0x8A || byte(2) == 0xA8 || byte(2) == 0xA9 || byte(2) == 0xAF) && byte(2) >= 0x80)
    return 3;  // U+2000..U+200A, U+2028, U+2029, U+202F
  if (c == 0xE2 && byte(1) == 0x81 && byte(2) == 0x9F) return 3;  // U+205F
  if (c == 0xE3 && byte(1) == 0x80 && byte(2) == 0x80) return 3;  // U+3000
  return 0;
}

// Python's str.split(): the words between runs of whitespace.
std::vector<std::string> split_whitespace(std::string_view s) {
  std::vector<std::string> words;
  std::string word;
  for (std::size_t i = 0; i < s.size();) {
    if (std::size_t w = whitespace_at(s, i)) {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
      i += w;
    } else {
      word += s[i++];
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

// Python's str.rstrip(): without its trailing whitespace.
std::string_view rstrip(std::string_view s) {
  std::size_t end = 0;  // one past the last byte that is not whitespace
  for (std::size_t i = 0; i < s.size();) {
    if (std::size_t w = whitespace_at(s, i)) {
      i += w;
    } else {
      end = ++i;
    }
  }
  return s.substr(0, end);
}

// re.sub of a two-character pattern (first, second) by `replace`: scans left
// to right and continues after each match, as Python does. Working on bytes
// gives the same as on characters: the patterns only test for ASCII bytes.
template <class First, class Second, class Replace>
std::string substitute_pairs(const std::string& s, First first, Second second, Replace replace) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  for (std::size_t i = 0; i < s.size();) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      replace(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

}  // namespace

std::string tokenize_13a(std::string_view text) {
  std::string line(text);
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  replace_all(line, "&quot;", "\"");
  replace_all(line, "&amp;", "&");
  replace_all(line, "&lt;", "<");
  replace_all(line, "&gt;", ">");
  // Rule 1: ' ' + symbol + ' '.
  std::string spaced = " ";
  for (char c : line) {
    if (is_13a_symbol(c)) {
      spaced += ' ';
      spaced += c;
      spaced += ' ';
    } else {
      spaced += c;
    }
  }
  spaced += ' ';
  auto not_digit = [](char c) { return !is_digit(c); };
  auto period_or_comma = [](char c) { return c == '.' || c == ','; };
  // Rule 2: ([^0-9])([.,]) -> "\1 \2 ".
  spaced = substitute_pairs(spaced, not_digit, period_or_comma, [](std::string& o, char a, char b) {
    o += a;
    o += ' ';
    o += b;
    o += ' ';
  });
  // Rule 3: ([.,])([^0-9]) -> " \1 \2".
  spaced = substitute_pairs(spaced, period_or_comma, not_digit, [](std::string& o, char a, char b) {
    o += ' ';
    o += a;
    o += ' ';
    o += b;
  });
  // Rule 4: ([0-9])(-) -> "\1 \2 ".
  spaced = substitute_pairs(
      spaced, is_digit, [](char c) { return c == '-'; },
      [](std::string& o, char a, char b) {
        o += a;
        o += ' ';
        o += b;
        o += ' ';
      });
  std::string out;
  for (const std::string& w : split_whitespace(spaced)) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

BleuScore corpus_bleu_13a(const std::vector<std::string>& hypotheses,
                          const std::vector<std::string>& references, BleuSmoothing smoothing) {
  ATTN_CHECK(hypotheses.size() == references.size(), ValueError,
             "corpus_bleu_13a: {} hypotheses for {} references", hypotheses.size(),
             references.size());
  BleuScore r;
  for (std::size_t s = 0; s < hypotheses.size(); ++s) {
    const data::Tokens hyp = split_whitespace(tokenize_13a(rstrip(hypotheses[s])));
    const data::Tokens ref = split_whitespace(tokenize_13a(rstrip(references[s])));
    r.sys_len += static_cast<std::int64_t>(hyp.size());
    r.ref_len += static_cast<std::int64_t>(ref.size());
    for (std::size_t n = 1; n <= 4; ++n) {
      r.counts[n - 1] += clipped_matches(hyp, ref, n);
      r.totals[n - 1] += static_cast<std::int64_t>(hyp.size() >= n ? hyp.size() - n + 1 : 0);
    }
  }
  return bleu_from_counts(r, smoothing);
}

BleuScore bleu_from_counts(const BleuScore& counts, BleuSmoothing smoothing) {
  BleuScore r;
  r.counts = counts.counts;
  r.totals = counts.totals;
  r.sys_len = counts.sys_len;
  r.ref_len = counts.ref_len;
  if (r.sys_len < r.ref_len)
    r.bp = r.sys_len > 0
               ? std::exp(1.0 - static_cast<double>(r.ref_len) / static_cast<double>(r.sys_len))
               : 0.0;
  else
    r.bp = 1.0;
  if (r.counts == std::array<std::int64_t, 4>{}) return r;  // nothing matches: 0
  double smooth = 1;
  for (std::size_t n = 0; n < 4; ++n) {
    if (r.totals[n] == 0) break;  // no hypothesis has n + 1 words: p stays 0
    const double total = static_cast<double>(r.totals[n]);
    if (r.counts[n] > 0) {
      r.precisions[n] = 100.0 * static_cast<double>(r.counts[n]) / total;
    } else if (smoothing == BleuSmoothing::exp) {
      smooth *= 2;
      r.precisions[n] = 100.0 / (smooth * total);
    }
  }
  double log_sum = 0;
  for (double p : r.precisions) {
    if (p == 0) return r;  // log 0: the score is 0
    log_sum += std::log(p);
  }
  r.score = r.bp * std::exp(log_sum / 4);
  return r;
}

std::string format_bleu(const BleuScore& b) {
  const double ratio =
      b.ref_len > 0 ? static_cast<double>(b.sys_len) / static_cast<double>(b.ref_len) : 0.0;
  return fmt::format(
      "BLEU = {:.2f} {:.1f}/{:.1f}/{:.1f}/{:.1f} (BP = {:.3f} ratio = {:.3f} hyp_len = {} "
      "ref_len = {})",
      b.score, b.precisions[0], b.precisions[1], b.precisions[2], b.precisions[3], b.bp, ratio,
      b.sys_len, b.ref_len);
}

}  // namespace attn::seq2seq
