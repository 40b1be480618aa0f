// attn/seq2seq/hparams.h — every hyperparameter of a training run, in one table.
//
// One row per hyperparameter: its name (the key in config.json and in the
// checkpoint, and the flag `--name` with '-' for '_' unless the row names
// another), where it lives in RunSpec, its type and range, its help text,
// whether `attn train --resume` may change it, and whether it is a flag at
// all (some are derived: the vocabulary sizes, max_len). The CLI's flags,
// config.json, the checkpoint and validation are all driven by this table,
// so adding a hyperparameter is one row (and the code that uses it).
//
// Defaults are those of d2l's Transformer (section 10.7): the table's
// default column, which RunSpec's member initializers (and
// nn::TransformerConfig's) must equal (tests/seq2seq/hparams_test.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "attn/io/json.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/trainer.h"

namespace attn::seq2seq {

// The corpus of a run and how it was cut (num_steps is the model config's).
struct DataSpec {
  std::string path;
  long num_examples = 600;
  int min_freq = 2;
  double valid_fraction = 0.0;  // d2l-style: the last pairs, not trained on
  std::int64_t num_pairs = 0;  // training pairs
  std::uint64_t fingerprint = 0;  // data_fingerprint() of the training data
  // A translator's data (with tokenizer "spm" or batch_tokens > 0):
  std::int64_t valid_size = 0, test_size = 0;  // pairs held out (data/corpus.h split)
  std::string valid_data, test_data;  // external held-out sets instead ("" : none)
  std::int64_t vocab_size = 8000;  // of the SentencePiece model
  SpmType spm_type = SpmType::unigram;
  std::int64_t max_length = 128;  // tokens a side (with <eos>); longer pairs are dropped
  std::int64_t batch_tokens = 0;  // tokens a batch (0: batch_size pairs, d2l's way)
  bool reverse = false;  // train the corpus's second column into its first
};

// What stays the same for a whole run.
struct RunSpec {
  ModelConfig model;
  DataSpec data;
  TrainOptions train;
  int threads = 0;
  // The run's identity (seq2seq/checkpoint.h: run_id_of()): its checkpoint
  // and the weights it saves carry it, and `--resume` continues a checkpoint
  // only beside a model of the same run. "" for runs of an older attn.
  std::string run_id;
};

// Where a hyperparameter is stored: config.json holds the `model` group; a
// checkpoint holds all three.
enum class HGroup { model, data, train };
enum class HType { integer, unsigned64, real, text, boolean };
// Whether `attn train --resume DIR` may change it (else a flag given with
// --resume must agree with the checkpoint).
enum class OnResume { fixed, may_change };
// command: a flag of `attn train`; global: a global option (--seed); none: not
// a flag (derived from the data or from other values).
enum class HFlag { command, global, none };

using HValue = std::variant<std::int64_t, std::uint64_t, double, std::string, bool>;

struct HParam {
  std::string_view name;  // JSON key and table name
  HGroup group;
  HType type;
  double lo = 0, hi = 0;  // the range of a number, both ends included
  OnResume on_resume;
  HFlag flag;
  std::string_view help;
  std::string_view flag_name = {};  // when not "--" + name with '-' for '_'
  // Text: the values allowed, '|'-separated; "": any non-empty text; "*":
  // any text, the empty one included (an optional file).
  std::string_view choices = {};
  HValue (*get)(const RunSpec&) = nullptr;
  void (*set)(RunSpec&, const HValue&) = nullptr;
  // The default, as format_hvalue writes it: d2l's (section 10.7), the
  // value of a RunSpec{} (whose member initializers the tests hold to this
  // column). Derived rows: their value before the data sets them. A flag
  // left out takes it, except where the CLI derives one (--data: the
  // bundled corpus; the languages: default_languages()).
  std::string_view default_text = {};
};

// ggml's way: one enum, one table, their sizes checked against each other.
enum class HP : std::size_t {
  architecture,
  src_vocab_size,
  tgt_vocab_size,
  num_hiddens,
  num_layers,
  num_heads,
  ffn_num_hiddens,
  dropout,
  max_len,
  use_bias,
  positions,
  num_kv_heads,
  embed_size,
  num_steps,
  tokenizer,
  source_lang,
  target_lang,
  path,
  num_examples,
  min_freq,
  valid_fraction,
  num_pairs,
  valid_size,
  test_size,
  valid_data,
  test_data,
  vocab_size,
  spm_type,
  max_length,
  batch_tokens,
  reverse,
  num_epochs,
  lr,
  batch_size,
  accum_steps,
  grad_clip,
  seed,
  embedding_init,
  loss,
  label_smoothing,
  adam_beta1,
  adam_beta2,
  adam_eps,
  lr_schedule,
  lr_warmup,
  valid_freq,
  early_stopping,
  valid_metric,
  time_limit,
  precision,
  count
};
inline constexpr std::size_t kNumHParams = static_cast<std::size_t>(HP::count);

const std::array<HParam, kNumHParams>& hparams();
const HParam& hparam(HP id);
// The row named `name`, or nullptr.
const HParam* find_hparam(std::string_view name);
// "--num-hiddens"
std::string flag_of(const HParam& p);
// "[1, 65536]", "[0, 0.99]"; "" for text and booleans.
std::string range_of(const HParam& p);

// The value as text ("32", "0.005", "true") and back. parse_hvalue throws
// ValueError naming the flag: "'fast' is not a number", "0 is not in [1, 65536]".
std::string format_hvalue(const HValue& value);
HValue parse_hvalue(const HParam& p, const std::string& text);
// ValueError unless `value` is of p's type and in its range.
void check_hvalue(const HParam& p, const HValue& value);

// The rules between hyperparameters, once (validate_model): num_hiddens
// divisible by num_heads, num_steps <= max_len, max_len x num_hiddens entries
// of the positional encoding at most kMaxPositionalEntries. ValueError naming
// the keys: "num_hiddens 30 is not divisible by num_heads 4". validate()
// adds the range of every row that is a flag (the derived ones are checked
// where they are read from a file).
void validate(const RunSpec& run);
void validate_model(const ModelConfig& model);
// An ISO 639-1 code as a model records its languages: two lowercase letters.
bool is_language_code(std::string_view code);
// Whether `path` names the bundled corpus (datasets/fra-eng/fra.txt[.gz],
// English<TAB>French), wherever it lies.
bool is_bundled_corpus(const std::string& path);
// The languages a run records where none were given: en and fr for the
// bundled corpus, fr and en with data.reverse; none for another corpus.
void default_languages(RunSpec& run);

// One group as a JSON object (in table order), and back: every row of the
// group read from `object` (typed, range-checked, errors naming the key as
// io::JsonObject does), then validated.
nlohmann::ordered_json hparams_to_json(const RunSpec& run, HGroup group);
void hparams_from_json(const io::JsonObject& object, HGroup group, RunSpec& run);

// Every row that is a flag, flat ({"num_hiddens": 32, ...}): what `attn
// train --dump-config` prints, what `--config FILE` reads, and the model
// directory's training.json.
nlohmann::ordered_json hparams_to_flat_json(const RunSpec& run);
// Sets the rows that `object` names (any subset of the flag rows; another
// key is an IOError naming it); returns their names.
std::vector<std::string> hparams_from_flat_json(const io::JsonObject& object, RunSpec& run);

// The presets of `attn train --preset`: d2l (the defaults: d2l's Transformer
// of section 10.7), bahdanau (its section 10.4 run) and tatoeba (a translator
// of the whole corpus; docs/design/translator.md says how it was chosen).
// Each is a list of (row name, value text) set over the defaults. ValueError
// for an unknown name.
const std::vector<std::string>& preset_names();
const std::vector<std::pair<std::string, std::string>>& preset(const std::string& name);
RunSpec preset_run(const std::string& name);

// What a fresh run derives from its settings, as `attn train` and
// attn.train() both resolve them: the languages (default_languages), the
// positions the model gets (max_len: 1000, or num_steps or max_length where
// longer); then validate(). ValueError as validate() throws it.
void resolve_run(RunSpec& run);

}  // namespace attn::seq2seq
