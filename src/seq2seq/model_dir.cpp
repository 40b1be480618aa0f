#include "attn/seq2seq/model_dir.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "attn/data/nmt.h"
#include "attn/data/text.h"
#include "attn/io/atomic_file.h"
#include "attn/io/safetensors.h"

namespace attn::seq2seq {

namespace fs = std::filesystem;

std::string config_to_json(const ModelConfig& c) {
  const auto& t = c.transformer;
  nlohmann::ordered_json j = {
      {"format", "attn-transformer"},
      {"format_version", 1},
      {"src_vocab_size", t.src_vocab_size},
      {"tgt_vocab_size", t.tgt_vocab_size},
      {"num_hiddens", t.num_hiddens},
      {"num_layers", t.num_layers},
      {"num_heads", t.num_heads},
      {"ffn_num_hiddens", t.ffn_num_hiddens},
      {"dropout", t.dropout},
      {"max_len", t.max_len},
      {"use_bias", t.use_bias},
      {"num_steps", c.num_steps},
  };
  return j.dump(2) + "\n";
}

namespace {

// A JSON value for an error message: short, one line, never a deep dump.
std::string describe(const nlohmann::json& v) {
  if (v.is_array()) return fmt::format("a list of {} items", v.size());
  if (v.is_object()) return fmt::format("an object of {} keys", v.size());
  return data::printable_excerpt(v.dump());
}

// The first NaN or infinity of a floating tensor, in row-major order:
// "NaN at index 3", or "" when every value is finite.
template <class T>
std::string first_non_finite_of(const Tensor& c) {
  const T* p = c.data<T>();
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
  // Parse, rejecting a key given twice (JSON readers disagree on which wins).
  nlohmann::json j;
  std::vector<std::string> keys;
  std::string duplicate;
  try {
    j = nlohmann::json::parse(
        text, [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          if (depth == 1 && event == nlohmann::json::parse_event_t::key) {
            const auto& k = parsed.get_ref<const std::string&>();
            if (duplicate.empty() && std::find(keys.begin(), keys.end(), k) != keys.end())
              duplicate = k;
            keys.push_back(k);
          }
          return true;
        });
  } catch (const nlohmann::json::exception& e) {
    throw IOError(
        fmt::format("'{}': not valid JSON: {}", what, data::printable_excerpt(e.what(), 300)));
  }
  ATTN_CHECK(j.is_object(), IOError, "'{}': expected a JSON object, got {}", what, describe(j));
  ATTN_CHECK(duplicate.empty(), IOError, "'{}': \"{}\" appears twice", what,
             data::printable_excerpt(duplicate));
  ATTN_CHECK(j.contains("format"), IOError, "'{}': missing \"format\"", what);
  ATTN_CHECK(
      j["format"].is_string() && j["format"].get_ref<const std::string&>() == "attn-transformer",
      IOError, "'{}': \"format\" must be \"attn-transformer\", got {}", what,
      describe(j["format"]));
  auto integer = [&](const char* key, std::int64_t lo, std::int64_t hi) {
    ATTN_CHECK(j.contains(key), IOError, "'{}': missing \"{}\"", what, key);
    const auto& v = j[key];
    ATTN_CHECK(v.is_number_integer(), IOError, "'{}': \"{}\" must be an integer, got {}", what, key,
               describe(v));
    // An unsigned value past int64's range would wrap; compare before converting.
    bool in_range = v.is_number_unsigned()
                        ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) &&
                              static_cast<std::int64_t>(v.get<std::uint64_t>()) >= lo
                        : v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
    ATTN_CHECK(in_range, IOError, "'{}': \"{}\" = {} is outside [{}, {}]", what, key, describe(v),
               lo, hi);
    return v.get<std::int64_t>();
  };
  ModelConfig c;
  auto& t = c.transformer;
  integer("format_version", 1, 1);
  t.src_vocab_size = integer("src_vocab_size", 4, kMaxVocabSize);
  t.tgt_vocab_size = integer("tgt_vocab_size", 4, kMaxVocabSize);
  t.num_hiddens = integer("num_hiddens", 1, 1 << 16);
  t.num_layers = integer("num_layers", 1, 1024);
  t.num_heads = integer("num_heads", 1, 1 << 16);
  t.ffn_num_hiddens = integer("ffn_num_hiddens", 1, 1 << 20);
  t.max_len = integer("max_len", 1, 1 << 20);
  c.num_steps = integer("num_steps", 1, t.max_len);
  ATTN_CHECK(t.num_hiddens % t.num_heads == 0, IOError,
             "'{}': \"num_hiddens\" = {} is not divisible by \"num_heads\" = {}", what,
             t.num_hiddens, t.num_heads);
  ATTN_CHECK(t.max_len * t.num_hiddens <= kMaxPositionalEntries, IOError,
             "'{}': \"max_len\" x \"num_hiddens\" = {} x {} positional-encoding entries, more "
             "than the limit of {}",
             what, t.max_len, t.num_hiddens, kMaxPositionalEntries);
  ATTN_CHECK(j.contains("dropout") && j["dropout"].is_number(), IOError,
             "'{}': \"dropout\" must be a number{}", what,
             j.contains("dropout") ? ", got " + describe(j["dropout"]) : " (missing)");
  t.dropout = j["dropout"].get<double>();
  ATTN_CHECK(t.dropout >= 0 && t.dropout < 1, IOError, "'{}': \"dropout\" = {} is outside [0, 1)",
             what, t.dropout);
  ATTN_CHECK(j.contains("use_bias") && j["use_bias"].is_boolean(), IOError,
             "'{}': \"use_bias\" must be true or false{}", what,
             j.contains("use_bias") ? ", got " + describe(j["use_bias"]) : " (missing)");
  t.use_bias = j["use_bias"].get<bool>();
  try {
    t.validate();
  } catch (const ValueError& e) {
    throw IOError(fmt::format("'{}': {}", what, e.what()));
  }
  return c;
}

std::int64_t min_num_parameters(const nn::TransformerConfig& c) {
  const std::int64_t H = c.num_hiddens, F = c.ffn_num_hiddens, L = c.num_layers;
  // Embeddings and the output layer, then per layer the attention projections
  // (4 in an encoder block, 8 in a decoder block) and the two FFN matrices of each.
  return (c.src_vocab_size + 2 * c.tgt_vocab_size) * H + L * (12 * H * H + 4 * H * F);
}

void save_model(const std::string& dir, const nn::EncoderDecoder& net, const ModelConfig& config,
                const data::Vocab& src_vocab, const data::Vocab& tgt_vocab) {
  fs::path d(dir);
  std::error_code ec;
  const bool existed = fs::exists(d, ec);
  io::ensure_directory(dir);
  try {
    io::TensorMap tensors;
    for (auto& [name, p] : net.named_parameters()) tensors.emplace(name, p.detach());
    // Every file is written in full to a temp file beside its target before any
    // is put in place, so an error on the way (a full disk, ...) leaves the
    // directory as it was; config.json goes in last.
    io::AtomicFile weights(d / "model.safetensors"), src(d / "src_vocab.txt"),
        tgt(d / "tgt_vocab.txt"), cfg(d / "config.json");
    weights.write(io::serialize_safetensors(tensors, {{"format", "pt"}}));
    src.write(src_vocab.to_text());
    tgt.write(tgt_vocab.to_text());
    cfg.write(config_to_json(config));
    for (io::AtomicFile* f : {&weights, &src, &tgt, &cfg}) f->commit();
  } catch (...) {
    if (!existed) fs::remove(d, ec);  // only if still empty: never deletes a file
    throw;
  }
}

void check_weights(const ModelConfig& config, const io::TensorMap& tensors,
                   const std::string& what) {
  const auto& c = config.transformer;
  std::int64_t held = 0;
  for (auto& [name, t] : tensors) {
    ATTN_CHECK(is_floating(t.dtype()), IOError, "'{}': tensor '{}' must be F32 or F64, not {}",
               what, data::printable_excerpt(name), dtype_name(t.dtype()));
    std::string bad = first_non_finite(t);
    ATTN_CHECK(bad.empty(), IOError, "'{}': tensor '{}' holds {}: the weights are corrupt", what,
               data::printable_excerpt(name), bad);
    held += t.numel();
  }
  // The sizes in config.json against the weights, before a model of those
  // sizes is allocated: the tensors that show each size by name, then the
  // total (so that a lying config cannot make attn allocate more than the
  // file holds).
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
  expect("encoder.embedding.weight", {c.src_vocab_size, c.num_hiddens},
         fmt::format("src_vocab_size {}, {}", c.src_vocab_size, hv));
  expect("decoder.embedding.weight", {c.tgt_vocab_size, c.num_hiddens},
         fmt::format("tgt_vocab_size {}, {}", c.tgt_vocab_size, hv));
  expect("decoder.dense.weight", {c.tgt_vocab_size, c.num_hiddens},
         fmt::format("tgt_vocab_size {}, {}", c.tgt_vocab_size, hv));
  for (const char* part : {"encoder", "decoder"})
    expect(
        fmt::format("{}.blks.block{}.ffn.dense1.weight", part, c.num_layers - 1),
        {c.ffn_num_hiddens, c.num_hiddens},
        fmt::format("num_layers {}, ffn_num_hiddens {}, {}", c.num_layers, c.ffn_num_hiddens, hv));
  const std::int64_t need = min_num_parameters(c);
  ATTN_CHECK(held >= need, IOError,
             "'{}': holds {} parameters but config.json's sizes need at least {}", what, held,
             need);
}

LoadedModel load_model(const std::string& dir) {
  fs::path d(dir);
  std::error_code ec;
  fs::file_status st = fs::status(d, ec);
  ATTN_CHECK(fs::exists(st), IOError, "model directory '{}' does not exist", dir);
  ATTN_CHECK(fs::is_directory(st), IOError, "model directory '{}' is not a directory", dir);
  auto file = [&](const char* name) {
    fs::path p = d / name;
    ATTN_CHECK(fs::exists(p, ec), IOError, "model directory '{}' has no {}", dir, name);
    return p.string();
  };
  LoadedModel m;
  const std::string config_path = file("config.json");
  m.config = config_from_json(data::read_text_file(config_path), config_path);
  const auto& c = m.config.transformer;
  auto vocab = [&](const char* name, std::int64_t want, const char* key) {
    const std::string path = file(name);
    data::Vocab v = data::Vocab::load(path, data::kReservedTokens);
    ATTN_CHECK(static_cast<std::int64_t>(v.size()) == want, IOError,
               "'{}': {} tokens but config.json says {} = {}", path, v.size(), key, want);
    return v;
  };
  m.src_vocab = vocab("src_vocab.txt", c.src_vocab_size, "src_vocab_size");
  m.tgt_vocab = vocab("tgt_vocab.txt", c.tgt_vocab_size, "tgt_vocab_size");

  const std::string weights_path = file("model.safetensors");
  io::TensorMap tensors = io::load_safetensors(weights_path);
  check_weights(m.config, tensors, weights_path);
  try {
    m.net = std::make_shared<nn::EncoderDecoder>(c);
    m.net->load_state_dict(tensors);
  } catch (const Error& e) {
    throw IOError(fmt::format("'{}': {}", weights_path, e.what()));
  }
  m.net->eval();
  return m;
}

}  // namespace attn::seq2seq
