// attn/seq2seq/bleu.h — BLEU scores.
#pragma once

#include <string>
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

}  // namespace attn::seq2seq
