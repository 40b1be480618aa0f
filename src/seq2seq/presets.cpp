// The presets of `attn train --preset` (hparams.h): named rows of the
// hyperparameter table over the structs' defaults; and what a fresh run
// derives from its settings.
#include <algorithm>

#include <fmt/ranges.h>
#include "attn/core/error.h"
#include "attn/seq2seq/hparams.h"
#include "attn/seq2seq/translation_data.h"

namespace attn::seq2seq {

namespace {

using Preset = std::vector<std::pair<std::string, std::string>>;

const std::vector<std::pair<std::string, Preset>>& presets() {
  static const std::vector<std::pair<std::string, Preset>> all = {
      {"d2l", {}},
      // d2l 10.4's run: the GRU encoder-decoder with Bahdanau attention.
      {"bahdanau",
       {{"architecture", "bahdanau"},
        {"embed_size", "32"},
        {"num_hiddens", "32"},
        {"num_layers", "2"},
        {"dropout", "0.1"},
        {"num_epochs", "250"}}},
      // A translator of the whole bundled corpus in about an hour on two
      // cores (docs/translator.md, docs/design/translator.md): the choices
      // and the runs behind them.
      {"tatoeba",
       {{"num_examples", "0"},
        {"tokenizer", "spm"},
        {"vocab_size", "8000"},
        {"valid_size", "2000"},
        {"test_size", "2000"},
        {"max_length", "64"},
        {"num_steps", "64"},
        {"batch_tokens", "2048"},
        {"num_hiddens", "256"},
        {"num_layers", "3"},
        {"num_heads", "4"},
        {"ffn_num_hiddens", "1024"},
        // Rotary positions: +2.1 test BLEU over d2l's added sinusoids at the
        // same steps and speed (docs/design/positions.md).
        {"positions", "rotary"},
        {"dropout", "0.1"},
        {"embedding_init", "scaled"},
        {"loss", "token"},
        {"label_smoothing", "0.1"},
        {"adam_beta1", "0.9"},
        {"adam_beta2", "0.98"},
        {"adam_eps", "1e-9"},
        {"lr", "0.001"},
        {"lr_schedule", "inverse-sqrt"},
        {"lr_warmup", "500"},
        {"grad_clip", "1"},
        {"num_epochs", "100"},
        {"valid_freq", "500"},
        {"early_stopping", "10"},
        {"valid_metric", "bleu"},
        {"time_limit", "60"}}},
  };
  return all;
}

}  // namespace

const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, _] : presets()) n.push_back(name);
    return n;
  }();
  return names;
}

const std::vector<std::pair<std::string, std::string>>& preset(const std::string& name) {
  for (const auto& [n, rows] : presets())
    if (n == name) return rows;
  throw ValueError(
      fmt::format("unknown preset '{}' (known: {})", name, fmt::join(preset_names(), ", ")));
}

RunSpec preset_run(const std::string& name) {
  RunSpec run;
  for (const auto& [key, text] : preset(name)) {
    const HParam* p = find_hparam(key);
    ATTN_CHECK(p != nullptr, InternalError, "preset {}: no hyperparameter '{}'", name, key);
    p->set(run, parse_hvalue(*p, text));
  }
  return run;
}

void resolve_run(RunSpec& run) {
  default_languages(run);  // en-fr for the bundled corpus (fr-en with --reverse)
  run.model.transformer.max_len = std::max<std::int64_t>(
      {1000, run.model.num_steps, uses_translation_data(run) ? run.data.max_length : 0});
  validate(run);
}

}  // namespace attn::seq2seq
