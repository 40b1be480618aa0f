#include "attn/seq2seq/model_dir.h"

#include <filesystem>
#include <nlohmann/json.hpp>

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

ModelConfig config_from_json(const std::string& text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw IOError(fmt::format("'{}': not valid JSON: {}", what, e.what()));
  }
  ATTN_CHECK(j.is_object(), IOError, "'{}': expected a JSON object", what);
  ATTN_CHECK(j.value("format", "") == "attn-transformer", IOError,
             "'{}': \"format\" must be \"attn-transformer\"", what);
  auto integer = [&](const char* key, std::int64_t lo, std::int64_t hi) {
    ATTN_CHECK(j.contains(key), IOError, "'{}': missing \"{}\"", what, key);
    const auto& v = j[key];
    ATTN_CHECK(v.is_number_integer(), IOError, "'{}': \"{}\" must be an integer, got {}", what, key,
               v.dump());
    std::int64_t x = v.get<std::int64_t>();
    ATTN_CHECK(x >= lo && x <= hi, IOError, "'{}': \"{}\" = {} is outside [{}, {}]", what, key, x,
               lo, hi);
    return x;
  };
  ModelConfig c;
  auto& t = c.transformer;
  ATTN_CHECK(integer("format_version", 1, 1) == 1, IOError, "'{}': unknown format_version", what);
  t.src_vocab_size = integer("src_vocab_size", 4, 100'000'000);
  t.tgt_vocab_size = integer("tgt_vocab_size", 4, 100'000'000);
  t.num_hiddens = integer("num_hiddens", 1, 1 << 16);
  t.num_layers = integer("num_layers", 1, 1024);
  t.num_heads = integer("num_heads", 1, 1 << 12);
  t.ffn_num_hiddens = integer("ffn_num_hiddens", 1, 1 << 20);
  t.max_len = integer("max_len", 1, 1 << 20);
  c.num_steps = integer("num_steps", 1, t.max_len);
  ATTN_CHECK(j.contains("dropout") && j["dropout"].is_number(), IOError,
             "'{}': \"dropout\" must be a number", what);
  t.dropout = j["dropout"].get<double>();
  ATTN_CHECK(j.contains("use_bias") && j["use_bias"].is_boolean(), IOError,
             "'{}': \"use_bias\" must be true or false", what);
  t.use_bias = j["use_bias"].get<bool>();
  try {
    t.validate();
  } catch (const ValueError& e) {
    throw IOError(fmt::format("'{}': {}", what, e.what()));
  }
  return c;
}

void save_model(const std::string& dir, const nn::EncoderDecoder& net, const ModelConfig& config,
                const data::Vocab& src_vocab, const data::Vocab& tgt_vocab) {
  io::ensure_directory(dir);
  fs::path d(dir);
  io::write_file_atomic(d / "config.json", config_to_json(config));
  io::TensorMap tensors;
  for (auto& [name, p] : net.named_parameters()) tensors.emplace(name, p.detach());
  io::save_safetensors((d / "model.safetensors").string(), tensors, {{"format", "pt"}});
  src_vocab.save((d / "src_vocab.txt").string());
  tgt_vocab.save((d / "tgt_vocab.txt").string());
}

LoadedModel load_model(const std::string& dir) {
  fs::path d(dir);
  ATTN_CHECK(fs::is_directory(d), IOError, "model directory '{}' does not exist", dir);
  auto file = [&](const char* name) {
    fs::path p = d / name;
    ATTN_CHECK(fs::exists(p), IOError, "model directory '{}' has no {}", dir, name);
    return p.string();
  };
  LoadedModel m;
  std::string config_path = file("config.json");
  m.config = config_from_json(data::read_text_file(config_path), config_path);
  m.src_vocab = data::Vocab::load(file("src_vocab.txt"));
  m.tgt_vocab = data::Vocab::load(file("tgt_vocab.txt"));
  auto check_vocab = [&](const data::Vocab& v, std::int64_t want, const char* name) {
    ATTN_CHECK(static_cast<std::int64_t>(v.size()) == want, IOError,
               "'{}': {} has {} tokens but config.json says {}", dir, name, v.size(), want);
    for (const char* tok : {"<pad>", "<bos>", "<eos>"})
      ATTN_CHECK(v[tok] != v.unk(), IOError, "'{}': {} lacks the reserved token {}", dir, name,
                 tok);
  };
  check_vocab(m.src_vocab, m.config.transformer.src_vocab_size, "src_vocab.txt");
  check_vocab(m.tgt_vocab, m.config.transformer.tgt_vocab_size, "tgt_vocab.txt");
  std::string weights_path = file("model.safetensors");
  io::TensorMap tensors = io::load_safetensors(weights_path);
  m.net = std::make_shared<nn::EncoderDecoder>(m.config.transformer);
  for (auto& [name, t] : tensors)
    ATTN_CHECK(is_floating(t.dtype()), IOError, "'{}': tensor '{}' must be F32 or F64",
               weights_path, name);
  try {
    m.net->load_state_dict(tensors);
  } catch (const Error& e) {
    throw IOError(fmt::format("'{}': {}", weights_path, e.what()));
  }
  m.net->eval();
  return m;
}

}  // namespace attn::seq2seq
