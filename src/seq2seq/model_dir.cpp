#include "attn/seq2seq/model_dir.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "attn/data/nmt.h"
#include "attn/data/text.h"
#include "attn/io/atomic_file.h"
#include "attn/io/dir_lock.h"
#include "attn/io/file_set.h"
#include "attn/io/json.h"
#include "attn/io/safetensors.h"
#include "attn/nn/init.h"
#include "attn/ops/quantize.h"
#include "attn/seq2seq/hparams.h"

namespace attn::seq2seq {

namespace fs = std::filesystem;

std::string config_to_json(const ModelConfig& c) {
  RunSpec run;
  run.model = c;
  nlohmann::ordered_json j = {{"format", "attn-transformer"}, {"format_version", 1}};
  j.update(hparams_to_json(run, HGroup::model));
  return j.dump(2) + "\n";
}

namespace {

// The first NaN or infinity of a floating tensor, in row-major order:
// "NaN at index 3", or "" when every value is finite.
template <class T>
std::string first_non_finite_of(const Tensor& c) {
  const T* p = c.data<T>();
  // A vectorized count first (|x| <= max is false for NaN and infinities);
  // the scalar search only when there is something to find.
  std::int64_t bad = 0;
  const T big = std::numeric_limits<T>::max();
#pragma omp simd reduction(+ : bad)
  for (std::int64_t i = 0; i < c.numel(); ++i) bad += !(std::fabs(p[i]) <= big);
  if (bad == 0) return "";
  for (std::int64_t i = 0, n = c.numel(); i < n; ++i)
    if (!std::isfinite(p[i]))
      return fmt::format("{} at index {}", std::isnan(p[i]) ? "NaN" : "an infinity", i);
  return "";
}

std::string first_non_finite(const Tensor& t) {
  Tensor c = t.contiguous();
  return c.dtype() == DType::f64 ? first_non_finite_of<double>(c) : first_non_finite_of<float>(c);
}

}  // namespace

ModelConfig config_from_json(const std::string& text, const std::string& what) {
  const std::string quoted = fmt::format("'{}'", what);
  nlohmann::json j = io::parse_json_strict(text, quoted);
  io::JsonObject o(j, quoted);
  ATTN_CHECK(o.get("format") == "attn-transformer", IOError,
             "{}: \"format\" must be \"attn-transformer\", got {}", quoted,
             io::describe_json(o.get("format")));
  o.integer("format_version", 1, 1);
  RunSpec run;
  hparams_from_json(o, HGroup::model, run);
  try {
    validate_model(run.model);
  } catch (const ValueError& e) {
    throw IOError(fmt::format("{}: {}", quoted, e.what()));
  }
  return run.model;
}

nn::BahdanauConfig ModelConfig::bahdanau() const {
  nn::BahdanauConfig b;
  b.src_vocab_size = transformer.src_vocab_size;
  b.tgt_vocab_size = transformer.tgt_vocab_size;
  b.embed_size = embed_size;
  b.num_hiddens = transformer.num_hiddens;
  b.num_layers = transformer.num_layers;
  b.dropout = transformer.dropout;
  b.max_len = transformer.max_len;
  return b;
}

std::shared_ptr<nn::Seq2SeqModel> make_model(const ModelConfig& config) {
  if (config.architecture == Architecture::bahdanau)
    return std::make_shared<nn::BahdanauEncoderDecoder>(config.bahdanau());
  return std::make_shared<nn::EncoderDecoder>(config.transformer);
}

void initialize_model(nn::Seq2SeqModel& net, const ModelConfig& config, EmbeddingInit init,
                      Generator& gen) {
  nn::xavier_init(net, gen);
  if (init == EmbeddingInit::scaled)
    nn::init_embeddings(net, 1.0 / std::sqrt(static_cast<double>(config.transformer.num_hiddens)),
                        gen);
}

std::int64_t min_num_parameters(const nn::TransformerConfig& c) {
  const std::int64_t H = c.num_hiddens, F = c.ffn_num_hiddens, L = c.num_layers;
  const std::int64_t kv = c.kv_heads() * (H / std::max<std::int64_t>(c.num_heads, 1));
  // Embeddings and the output layer, then per layer the attention projections
  // (4 in an encoder block, 8 in a decoder block; W_k and W_v kv wide) and the
  // two FFN matrices of each.
  return (c.src_vocab_size + 2 * c.tgt_vocab_size) * H + L * (6 * H * H + 6 * H * kv + 4 * H * F);
}

const char* weights_dtype_name(WeightsDType dtype) {
  switch (dtype) {
    case WeightsDType::f32: return "f32";
    case WeightsDType::bf16: return "bf16";
    case WeightsDType::int8: return "int8";
  }
  return "f32";
}

WeightsDType parse_weights_dtype(const std::string& text) {
  for (WeightsDType d : {WeightsDType::f32, WeightsDType::bf16, WeightsDType::int8})
    if (text == weights_dtype_name(d)) return d;
  throw ValueError(fmt::format("unknown weights dtype '{}' (choices: f32, bf16, int8)",
                               data::printable_excerpt(text)));
}

namespace {

// The tensors to store narrower than F32 for `dtype`; for int8, each matrix
// is replaced by its whole-number values and its ".scale" tensor is added.
io::StoredTypes narrow_weights(io::TensorMap& tensors, WeightsDType dtype) {
  io::StoredTypes narrow;
  if (dtype == WeightsDType::f32) return narrow;
  std::vector<std::string> matrices;
  for (const auto& [name, t] : tensors)
    if (t.dtype() == DType::f32 && t.dim() >= 2) matrices.push_back(name);
  for (const std::string& name : matrices) {
    if (dtype == WeightsDType::bf16) {
      narrow[name] = io::StoredAs::bf16;
      continue;
    }
    if (tensors.at(name).dim() != 2) continue;
    const std::string scale = name + kScaleSuffix;
    ATTN_CHECK(!tensors.count(scale), ValueError,
               "save_model: tensor '{}' is named as the scales of '{}' would be", scale, name);
    QuantizedRows q = quantize_rows_int8(tensors.at(name), name);
    tensors[name] = q.values;
    tensors.emplace(scale, q.scales);
    narrow[name] = io::StoredAs::i8;
  }
  return narrow;
}

// The weights as f32 again: each I8 tensor times its ".scale" per row, the
// scale tensors removed. IOError (naming `what`) for an I8 tensor without
// its scales, or scales of the wrong shape or not finite and positive.
WeightsDType restore_weights(io::TensorMap& tensors, const io::StoredTypes& stored,
                             const std::string& what) {
  WeightsDType dtype = WeightsDType::f32;
  for (const auto& [name, as] : stored) {
    if (as == io::StoredAs::bf16) {
      if (dtype == WeightsDType::f32) dtype = WeightsDType::bf16;
      continue;
    }
    dtype = WeightsDType::int8;
    const std::string excerpt = data::printable_excerpt(name);
    Tensor& w = tensors.at(name);
    auto it = tensors.find(name + kScaleSuffix);
    ATTN_CHECK(it != tensors.end(), IOError,
               "'{}': tensor '{}' is stored as I8 but '{}{}' (its scales) is missing", what,
               excerpt, excerpt, kScaleSuffix);
    const Tensor scales = it->second.contiguous();
    ATTN_CHECK(w.dim() == 2 && scales.dtype() == DType::f32 && !stored.count(it->first) &&
                   scales.shape() == Shape{w.size(0)},
               IOError, "'{}': tensor '{}{}' must be F32 of shape [{}] (one scale a row of '{}')",
               what, excerpt, kScaleSuffix, w.dim() == 2 ? w.size(0) : 0, excerpt);
    const float* s = scales.data<float>();
    float* x = w.data<float>();
    const std::int64_t N = w.size(0), K = w.size(1);
    for (std::int64_t n = 0; n < N; ++n) {
      ATTN_CHECK(std::isfinite(s[n]) && s[n] > 0, IOError,
                 "'{}': tensor '{}{}' holds {} at row {}: a scale must be finite and positive",
                 what, excerpt, kScaleSuffix, s[n], n);
      for (std::int64_t k = 0; k < K; ++k) x[n * K + k] *= s[n];
    }
    tensors.erase(it);
  }
  return dtype;
}

}  // namespace

void save_model(const std::string& dir, const nn::Seq2SeqModel& net, const ModelConfig& config,
                const data::Vocab& src_vocab, const data::Vocab& tgt_vocab,
                const ModelExtras& extras) {
  const fs::path d(dir);
  std::error_code ec;
  const bool existed = fs::exists(d, ec);
  io::ensure_directory(d);
  std::optional<io::WriteGuard> guard;
  try {
    guard.emplace(d, "attn save_model");
    io::TensorMap tensors;
    for (auto& [name, p] : net.named_parameters()) tensors.emplace(name, p.detach());
    io::Metadata metadata = {{"format", "pt"}};
    if (!extras.run_id.empty()) metadata.emplace(kRunIdKey, extras.run_id);
    const io::StoredTypes narrow = narrow_weights(tensors, extras.weights);
    std::vector<std::pair<std::string, std::string>> files = {
        {"config.json", config_to_json(config)},
        {kWeightsFile, io::serialize_safetensors(tensors, metadata, false, narrow)},
        {"src_vocab.txt", src_vocab.to_text()},
        {"tgt_vocab.txt", tgt_vocab.to_text()}};
    ATTN_CHECK((config.tokenizer == TokenizerKind::spm) == !extras.spm_model.empty(), ValueError,
               "save_model: a {} model {} a SentencePiece model", enum_name(config.tokenizer),
               extras.spm_model.empty() ? "needs" : "has no use for");
    if (!extras.spm_model.empty()) files.emplace_back(kSpmFile, extras.spm_model);
    if (!extras.training_json.empty()) files.emplace_back(kTrainingFile, extras.training_json);
    io::write_file_set(d, kModelKind, files);
  } catch (...) {
    if (!existed) {  // leave no trace of a directory this call created
      if (guard) {  // its contents only with the lock: else they are another writer's
        fs::remove_all(d / io::kPendingDir, ec);
        guard->release_and_remove();
      }
      fs::remove(d, ec);  // only if empty: never deletes a file of someone else's
    }
    throw;
  }
}

void check_weights(const ModelConfig& config, const io::TensorMap& tensors,
                   const std::string& what) {
  const auto& c = config.transformer;
  for (auto& [name, t] : tensors) {
    ATTN_CHECK(is_floating(t.dtype()), IOError, "'{}': tensor '{}' must be F32 or F64, not {}",
               what, data::printable_excerpt(name), dtype_name(t.dtype()));
    std::string bad = first_non_finite(t);
    ATTN_CHECK(bad.empty(), IOError, "'{}': tensor '{}' holds {}: the weights are corrupt", what,
               data::printable_excerpt(name), bad);
  }
  // The sizes in config.json against the weights, before a model of those
  // sizes is allocated (so that a lying config cannot make attn allocate more
  // than the file holds): first the tensors that show each size, named with
  // the sizes they contradict.
  auto expect = [&](const std::string& name, const Shape& want, const std::string& sizes) {
    auto it = tensors.find(name);
    ATTN_CHECK(it != tensors.end(), IOError,
               "'{}': tensor '{}' is missing (config.json: {}; do the config and the weights "
               "belong together?)",
               what, name, sizes);
    ATTN_CHECK(it->second.shape() == want, IOError,
               "'{}': tensor '{}' has shape {} but config.json ({}) needs {}", what, name,
               shape_str(it->second.shape()), sizes, shape_str(want));
  };
  const std::string hv = fmt::format("num_hiddens {}", c.num_hiddens);
  // The embeddings are embed_size wide in a Bahdanau model, num_hiddens in a
  // Transformer; the last layer shows num_layers.
  const bool rnn = config.architecture == Architecture::bahdanau;
  const std::int64_t E = rnn ? config.embed_size : c.num_hiddens;
  const std::string ev = rnn ? fmt::format("embed_size {}", E) : hv;
  expect("encoder.embedding.weight", {c.src_vocab_size, E},
         fmt::format("src_vocab_size {}, {}", c.src_vocab_size, ev));
  expect("decoder.embedding.weight", {c.tgt_vocab_size, E},
         fmt::format("tgt_vocab_size {}, {}", c.tgt_vocab_size, ev));
  expect("decoder.dense.weight", {c.tgt_vocab_size, c.num_hiddens},
         fmt::format("tgt_vocab_size {}, {}", c.tgt_vocab_size, hv));
  for (const char* part : {"encoder", "decoder"}) {
    if (rnn)
      expect(fmt::format("{}.rnn.weight_hh_l{}", part, c.num_layers - 1),
             {3 * c.num_hiddens, c.num_hiddens},
             fmt::format("num_layers {}, {}", c.num_layers, hv));
    else
      expect(fmt::format("{}.blks.block{}.ffn.dense1.weight", part, c.num_layers - 1),
             {c.ffn_num_hiddens, c.num_hiddens},
             fmt::format("num_layers {}, ffn_num_hiddens {}, {}", c.num_layers, c.ffn_num_hiddens,
                         hv));
  }
  // Then every tensor a model of config's sizes has, by name and shape: a
  // missing one is named, however large.
  const auto expected =
      rnn ? nn::bahdanau_parameter_shapes(config.bahdanau()) : nn::transformer_parameter_shapes(c);
  for (const auto& [name, shape] : expected) {
    auto it = tensors.find(name);
    ATTN_CHECK(it != tensors.end(), IOError,
               "'{}': tensor '{}' is missing (a model of config.json's sizes has {} tensors; "
               "this file holds {})",
               what, name, expected.size(), tensors.size());
    ATTN_CHECK(it->second.shape() == shape, IOError,
               "'{}': tensor '{}' has shape {} but config.json's sizes need {}", what, name,
               shape_str(it->second.shape()), shape_str(shape));
  }
}

namespace {

// The model from its four files, `open` giving each one.
template <class Open>
LoadedModel load_model_files(Open&& open) {
  LoadedModel m;
  const io::InputFile& config_file = open("config.json");
  m.config = config_from_json(data::decode_text(config_file.read_all(kMaxConfigBytes),
                                                data::quote_path(config_file.path())),
                              config_file.path());
  const auto& c = m.config.transformer;
  auto vocab = [&](const char* name, std::int64_t want, const char* key,
                   const std::vector<std::string>& required) {
    const io::InputFile& f = open(name);
    const std::string what = data::quote_path(f.path());
    data::Vocab v = data::Vocab::parse(data::decode_text(f.read_all(data::kMaxTextBytes), what),
                                       what, required);
    ATTN_CHECK(static_cast<std::int64_t>(v.size()) == want, IOError,
               "{}: {} tokens but config.json says {} = {}", what, v.size(), key, want);
    return v;
  };
  m.src_vocab = vocab("src_vocab.txt", c.src_vocab_size, "src_vocab_size", data::kSourceTokens);
  m.tgt_vocab = vocab("tgt_vocab.txt", c.tgt_vocab_size, "tgt_vocab_size", data::kTargetTokens);
  if (m.config.tokenizer == TokenizerKind::spm) {
    const io::InputFile& f = open(kSpmFile);
    const std::string what = data::quote_path(f.path());
    m.spm_model = f.read_all(kMaxSpmBytes);
    m.tokenizer = data::sentencepiece_tokenizer(m.spm_model, what);
    const auto& pieces = m.tokenizer->vocab(data::Side::source).tokens();
    ATTN_CHECK(pieces == m.src_vocab.tokens() && pieces == m.tgt_vocab.tokens(), IOError,
               "{}: its pieces are not those of src_vocab.txt and tgt_vocab.txt", what);
  } else {
    m.tokenizer = data::word_tokenizer(m.src_vocab, m.tgt_vocab);
  }

  const io::InputFile& weights = open(kWeightsFile);
  io::Metadata metadata;
  io::StoredTypes stored;
  io::TensorMap tensors = io::load_safetensors(weights, &metadata, &stored);
  if (auto it = metadata.find(kRunIdKey); it != metadata.end()) m.run_id = it->second;
  m.weights = restore_weights(tensors, stored, weights.path());
  check_weights(m.config, tensors, weights.path());
  try {
    {
      // Every parameter is loaded below (strictly): no random draws first.
      nn::init::SkipInitGuard skip_init;
      m.net = make_model(m.config);
    }
    m.net->adopt_state_dict(std::move(tensors));
  } catch (const Error& e) {
    throw IOError(fmt::format("'{}': {}", weights.path(), e.what()));
  }
  m.net->eval();
  return m;
}

// The model's files opened directly, without a manifest, each read once
// into memory (InputFile::snapshot): the checks and the manifest's digests
// see the same bytes.
struct PlainFiles {
  fs::path dir;
  std::map<std::string, io::InputFile> open;
  const io::InputFile& operator()(const std::string& name) {
    if (auto it = open.find(name); it != open.end()) return it->second;
    const fs::path p = dir / name;
    std::error_code ec;
    ATTN_CHECK(fs::exists(fs::symlink_status(p, ec)), IOError, "model directory '{}' has no {}",
               dir.string(), name);
    io::InputFile& f = open.emplace(name, io::InputFile(p.string())).first->second;
    f.snapshot(kMaxModelFileBytes);
    return f;
  }
};

void check_is_directory(const fs::path& d) {
  std::error_code ec;
  fs::file_status st = fs::status(d, ec);
  ATTN_CHECK(!ec || ec == std::errc::no_such_file_or_directory, IOError, "model directory '{}': {}",
             d.string(), ec.message());
  ATTN_CHECK(fs::exists(st), IOError, "model directory '{}' does not exist", d.string());
  ATTN_CHECK(fs::is_directory(st), IOError, "model directory '{}' is not a directory", d.string());
}

}  // namespace

LoadedModel load_model(const std::string& dir) {
  check_is_directory(dir);
  io::FileSet set(dir, kModelKind);
  LoadedModel m = load_model_files(
      [&](const std::string& name) -> const io::InputFile& { return set.file(name); });
  if (set.contains(kTrainingFile))
    m.training_json = set.file(kTrainingFile).read_all(kMaxConfigBytes);
  return m;
}

void write_model_manifest(const std::string& dir) {
  check_is_directory(dir);
  io::WriteGuard guard(dir, "attn manifest");
  PlainFiles files{dir, {}};
  load_model_files(files);  // every check of load_model, on the files as they are
  std::vector<std::pair<std::string, const io::InputFile*>> listed;
  for (const std::string& name : kModelFiles) listed.emplace_back(name, &files(name));
  for (const char* extra : {kSpmFile, kTrainingFile}) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(fs::path(dir) / extra, ec)))
      listed.emplace_back(extra, &files(extra));
  }
  io::write_manifest_of_open(dir, kModelKind, listed);
}

}  // namespace attn::seq2seq
