// attn/seq2seq/model_dir.h — the model directory that `attn train` writes and
// `attn translate` reads (docs/model-format.md):
//   config.json        every hyperparameter of the model and of its data
//   model.safetensors  the parameters, under d2l's PyTorch state_dict names
//   src_vocab.txt      source tokens, one per line, in index order
//   tgt_vocab.txt      target tokens, likewise
//   manifest.json      size and SHA-256 of each of the four (io/file_set.h)
// The four files are one unit: written as an io file set (a reader sees the
// complete old model or the complete new one, whatever moment a write is cut
// at), and read only when each matches the manifest.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attn/core/rng.h"
#include "attn/data/tokenizer.h"
#include "attn/data/vocab.h"
#include "attn/io/safetensors.h"
#include "attn/nn/bahdanau.h"
#include "attn/nn/transformer.h"
#include "attn/seq2seq/options.h"

namespace attn::seq2seq {

struct ModelConfig {
  // The sizes of the model. A Bahdanau model (architecture below) reads the
  // ones both have (vocabulary sizes, num_hiddens, num_layers, dropout,
  // max_len) from here and ignores the Transformer's own (num_heads,
  // ffn_num_hiddens, use_bias).
  nn::TransformerConfig transformer;
  std::int64_t num_steps = 10;  // the sequence length the data was cut to
  TokenizerKind tokenizer = TokenizerKind::word;  // seq2seq/options.h
  Architecture architecture = Architecture::transformer;
  std::int64_t embed_size = 32;  // the Bahdanau model's embeddings
  // The languages it translates from and into, ISO 639-1 codes ("en",
  // "fr"); "" where not recorded (a model of an older attn, or of a corpus
  // whose languages were not given).
  std::string source_lang, target_lang;

  nn::BahdanauConfig bahdanau() const;
};

// A fresh model of `config`'s architecture and sizes (initialized as its
// constructor does).
std::shared_ptr<nn::Seq2SeqModel> make_model(const ModelConfig& config);

// The start of a trained model, as d2l's train_seq2seq makes it: Xavier
// uniform weights (nn::xavier_init), then with EmbeddingInit::scaled the
// embeddings drawn again from N(0, 1 / num_hiddens), all from `gen`.
void initialize_model(nn::Seq2SeqModel& net, const ModelConfig& config, EmbeddingInit init,
                      Generator& gen);

// Limits of config.json beyond which a config is taken for a broken file:
// vocabulary sizes, and max_len x num_hiddens (the positional-encoding table,
// which is computed, not stored, so the weights cannot vouch for it).
inline constexpr std::int64_t kMaxVocabSize = 100'000'000;
inline constexpr std::int64_t kMaxPositionalEntries = std::int64_t{1} << 26;

inline constexpr const char* kModelKind = "attn-model";
inline constexpr const char* kWeightsFile = "model.safetensors";
inline const std::vector<std::string> kModelFiles = {"config.json", kWeightsFile, "src_vocab.txt",
                                                     "tgt_vocab.txt"};
// The key of model.safetensors' metadata that names the training run that
// saved the weights (RunSpec::run_id), when attn trained them.
inline constexpr const char* kRunIdKey = "attn.run_id";
// config.json is a few hundred bytes; a larger one is not a config.
inline constexpr std::uint64_t kMaxConfigBytes = 1 << 20;
// The SentencePiece model of a "spm" model, and the training configuration.
inline constexpr const char* kSpmFile = "spm.model";
inline constexpr const char* kTrainingFile = "training.json";
inline constexpr std::uint64_t kMaxSpmBytes = 64 << 20;
// The most bytes write_model_manifest holds of one file (it checks and
// hashes each from one read, in memory).
inline constexpr std::uint64_t kMaxModelFileBytes = std::uint64_t{1} << 36;

// How model.safetensors stores the weights (attn convert --dtype):
//   f32   every tensor F32, as attn train writes them;
//   bf16  every tensor of 2 or more dimensions BF16 (rounded to the nearest);
//   int8  every matrix I8 with one F32 scale per row beside it, "NAME" and
//         "NAME.scale" (kScaleSuffix): NAME = I8 x scale, quantized as int8
//         products quantize a weight (ops/quantize.h: quantize_rows_int8).
// Read back, the weights are f32 again: the model computes as any other.
enum class WeightsDType { f32, bf16, int8 };
inline constexpr const char* kScaleSuffix = ".scale";
const char* weights_dtype_name(WeightsDType dtype);
WeightsDType parse_weights_dtype(const std::string& text);  // ValueError: not f32|bf16|int8

struct LoadedModel {
  ModelConfig config;
  std::shared_ptr<nn::Seq2SeqModel> net;
  data::Vocab src_vocab, tgt_vocab;
  // Text <-> ids as the model was trained: d2l's words, or its SentencePiece
  // model (spm.model).
  std::shared_ptr<data::Tokenizer> tokenizer;
  std::string run_id;  // the run that saved the weights (kRunIdKey); "" if not known
  WeightsDType weights = WeightsDType::f32;  // as model.safetensors stores them
  std::string spm_model;  // spm.model's bytes ("" for word vocabularies)
  std::string training_json;  // training.json ("" for none)
};

// What a model directory holds besides the config and the weights: the
// vocabularies, and for a SentencePiece model its bytes (spm.model); the
// training configuration (training.json, every hyperparameter of the run
// that made it) when there is one.
struct ModelExtras {
  std::string spm_model;  // "" for word vocabularies
  std::string training_json;  // "" for none
  std::string run_id;  // the training run (RunSpec::run_id), kept in the weights' metadata
  WeightsDType weights = WeightsDType::f32;  // how model.safetensors stores them
};

// Writes the four files and the manifest as one file set, creating `dir` if
// needed (and removing it again if this call created it and fails). Takes
// the directory's lock unless this process holds it (io::WriteGuard); a
// directory another process holds is refused.
void save_model(const std::string& dir, const nn::Seq2SeqModel& net, const ModelConfig& config,
                const data::Vocab& src_vocab, const data::Vocab& tgt_vocab,
                const ModelExtras& extras = {});

// Reads and checks all four files before it builds the model. Every problem
// is an IOError of one line naming the file (and the key, line or tensor):
//   - the directory missing; no manifest.json, a file missing, unreadable,
//     not a regular file, or not the one the manifest describes (edited,
//     swapped, copied from another model); a file empty;
//   - config.json: not JSON, not an object, a key missing, given twice, of the
//     wrong type or outside its range, num_heads not dividing num_hiddens,
//     max_len x num_hiddens > kMaxPositionalEntries;
//   - a vocabulary: as data::Vocab::load ("<unk>" at any index), a token of
//     data::kSourceTokens / kTargetTokens missing, a size other than
//     config.json's;
//   - model.safetensors: as io::parse_safetensors; a tensor that is not F32,
//     F64, BF16 or I8 (with its F32 scales) or holds a NaN or infinity; a tensor missing, extra or
//     of a shape other than config.json implies (named; checked before anything of the config's
//     sizes is allocated).
LoadedModel load_model(const std::string& dir);

// Writes `dir`'s manifest.json for the four files as they are, after every
// check load_model makes of them: for a model directory written by another
// tool (a d2l PyTorch export) or by an attn without manifests.
void write_model_manifest(const std::string& dir);

// The weights checks of load_model on tensors already read (`what` names
// their file): dtypes, NaN/infinity, the shapes that show config's sizes,
// then every tensor a model of `config` has, by name and shape
// (nn::transformer_parameter_shapes). After it passes, a model of `config`
// is no larger than `tensors`.
void check_weights(const ModelConfig& config, const io::TensorMap& tensors,
                   const std::string& what);

// config.json text <-> config (exposed for tests). `what` names the text in
// errors (quoted: "'out/model/config.json': ...").
std::string config_to_json(const ModelConfig& config);
ModelConfig config_from_json(const std::string& text, const std::string& what);

// A lower bound on the parameter count of a Transformer of this config: the
// weight matrices alone (embeddings, output layer, attention projections, FFN),
// without biases and layer norms. Exact arithmetic within the limits above.
std::int64_t min_num_parameters(const nn::TransformerConfig& config);

}  // namespace attn::seq2seq
