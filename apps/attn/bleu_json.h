// apps/attn/bleu_json.h — a BLEU score as JSON, the same in 'attn evaluate
// --json' and 'attn bleu --json'.
#pragma once

#include <nlohmann/json.hpp>

#include "attn/seq2seq/bleu.h"

namespace attn::cli {

// sacreBLEU's parts; `casing` says how the text was cased ("mixed": as written).
inline nlohmann::ordered_json bleu_json(const seq2seq::BleuScore& bleu, const char* casing) {
  return {{"score", bleu.score},     {"counts", bleu.counts},
          {"totals", bleu.totals},   {"precisions", bleu.precisions},
          {"bp", bleu.bp},           {"sys_len", bleu.sys_len},
          {"ref_len", bleu.ref_len}, {"tokenizer", "13a"},
          {"smoothing", "exp"},      {"case", casing}};
}

}  // namespace attn::cli
