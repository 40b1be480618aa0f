// attn/seq2seq/bleu.h — BLEU scores.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attn/data/text.h"

namespace attn::seq2seq {

// d2l's bleu(pred_seq, label_seq, k): sentences as space-separated tokens;
//   exp(min(0, 1 - len_label / len_pred)) * prod_{n=1..k} p_n^(1/2^n)
// with p_n the clipped n-gram precision. Where d2l divides by zero (a
// prediction shorter than n, or empty) the precision counts as 0.
double bleu(const std::string& pred_seq, const std::string& label_seq, int k);

// Standard corpus BLEU-4 (Papineni et al. 2002): clipped n-gram counts summed
// over the corpus, geometric mean of p_1..p_4, brevity penalty on the total
// lengths; one reference per sentence. 0 when any p_n is 0.
double corpus_bleu(const std::vector<data::Tokens>& predictions,
                   const std::vector<data::Tokens>& references, int max_n = 4);

// ---- BLEU as sacreBLEU computes it ----
//
// sacreBLEU (Post 2018) scores detokenized text: it tokenizes hypotheses and
// references itself with mteval-v13a's rules, so that scores do not depend on
// each system's own tokenizer. attn follows its default configuration: the
// 13a tokenizer, case-sensitive, corpus BLEU-4, one reference per sentence,
// "exp" smoothing.

// sacreBLEU's tokenizer_13a (mteval-v13a): removes "<skipped>" and "-\n",
// turns "\n" into ' ', unescapes &quot; &amp; &lt; &gt; (in that order), pads
// the line with a space on each side, then
//   1. puts spaces around each of { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * +
//      : ; < = > ? @ /   (every ASCII symbol but ' - , .)
//   2. splits '.' and ',' from a preceding non-digit: "x." -> "x . "
//   3. splits '.' and ',' from a following non-digit: ".x" -> " . x"
//   4. splits '-' from a preceding digit: "3-" -> "3 - "
// (each rule applied left to right, non-overlapping, as Python's re.sub), and
// finally joins the whitespace-separated words (Python's str.split: Unicode
// whitespace, U+00A0 and U+202F included) with single spaces. Digits are
// ASCII 0-9; the text is UTF-8.
std::string tokenize_13a(std::string_view line);

enum class BleuSmoothing {
  none,  // a zero n-gram precision makes the score 0
  exp,  // sacreBLEU's default (NIST's, Chen & Cherry 2014 method 3): the k-th
        // zero precision of a corpus counts as 1 / (2^k * total n-grams)
};

// Corpus BLEU-4 and the parts sacreBLEU reports.
struct BleuScore {
  double score = 0;  // 0..100
  // Clipped matches and hypothesis n-grams, n = 1..4, summed over the corpus.
  std::array<std::int64_t, 4> counts{}, totals{};
  std::array<double, 4> precisions{};  // percent, after smoothing
  double bp = 0;  // brevity penalty
  std::int64_t sys_len = 0, ref_len = 0;  // words after tokenizing
};

// sacreBLEU's corpus_bleu(hypotheses, [references]) with tokenize='13a':
// each line has its trailing whitespace removed and is tokenized by
// tokenize_13a and split on spaces; n-gram matches are clipped by the
// reference's counts and summed over the corpus with the lengths;
//   BP   = 1 if sys_len >= ref_len; exp(1 - ref_len / sys_len) if shorter;
//          0 if sys_len = 0
//   p_n  = 100 counts_n / totals_n (smoothed as above when counts_n = 0)
//   BLEU = BP exp(sum_n log(p_n) / 4)
// 0 when nothing matches at all, or when some totals_n is 0 (no hypothesis has
// n words). ValueError when the two lists differ in length.
BleuScore corpus_bleu_13a(const std::vector<std::string>& hypotheses,
                          const std::vector<std::string>& references,
                          BleuSmoothing smoothing = BleuSmoothing::exp);

// The score and precisions of corpus BLEU from its sums alone (counts,
// totals, sys_len, ref_len; the rest of `counts` is ignored): corpus_bleu_13a
// is this over the sums of its sentences, so the sums of parts of a corpus
// (computed apart, e.g. by the processes of a data-parallel run) give the
// score of the whole.
BleuScore bleu_from_counts(const BleuScore& counts, BleuSmoothing smoothing = BleuSmoothing::exp);

// sacreBLEU's one-line report:
// "BLEU = 12.34 45.0/20.0/10.0/5.0 (BP = 1.000 ratio = 1.010 hyp_len = 300 ref_len = 297)".
std::string format_bleu(const BleuScore& score);

}  // namespace attn::seq2seq
