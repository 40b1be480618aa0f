#include "attn/seq2seq/bleu.h"

#include <cmath>
#include <map>

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

}  // namespace attn::seq2seq
