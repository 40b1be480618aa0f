#include "attn/seq2seq/model_dir.h"

#include "attn/core/rng.h"
#include "attn/io/file_set.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>
#include "attn/autograd/node.h"
#include "attn/data/nmt.h"
#include "attn/io/safetensors.h"
#include "attn/ops/quantize.h"
#include "testing.h"

using namespace attn;
using namespace attn::seq2seq;
namespace fs = std::filesystem;

namespace {
struct Fixture {
  Fixture() {
    config.transformer.src_vocab_size = 7;
    config.transformer.tgt_vocab_size = 8;
    config.transformer.num_hiddens = 8;
    config.transformer.num_heads = 2;
    config.transformer.ffn_num_hiddens = 16;
    src = data::Vocab({{"a", "b", "c"}}, 1, data::kReservedTokens);
    tgt = data::Vocab({{"x", "y", "z", "w"}}, 1, data::kReservedTokens);
    net = std::make_shared<nn::EncoderDecoder>(config.transformer);
  }
  ModelConfig config;
  data::Vocab src, tgt;
  std::shared_ptr<nn::EncoderDecoder> net;
};

std::string fresh_dir(const std::string& name) {
  std::string d = ::testing::TempDir() + name;
  fs::remove_all(d);
  return d;
}

std::string load_error(const std::string& dir) {
  try {
    load_model(dir);
  } catch (const IOError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(ModelDir, SaveLoadGivesTheSameOutputs) {
  Fixture f;
  std::string dir = fresh_dir("model_rt");
  save_model(dir, *f.net, f.config, f.src, f.tgt);
  for (const char* name : {"config.json", "model.safetensors", "src_vocab.txt", "tgt_vocab.txt"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / name)) << name;
  LoadedModel m = load_model(dir);
  EXPECT_EQ(m.src_vocab.tokens(), f.src.tokens());
  EXPECT_EQ(m.config.transformer.num_hiddens, 8);
  autograd::NoGradGuard g;
  f.net->eval();
  Tensor X = from_vector(std::vector<std::int64_t>{4, 5, 3}, {1, 3});
  Tensor Y = from_vector(std::vector<std::int64_t>{2, 4}, {1, 2});
  Tensor lens = from_vector(std::vector<std::int64_t>{3});
  EXPECT_EQ(to_vector<float>(m.net->forward(X, Y, lens)),
            to_vector<float>(f.net->forward(X, Y, lens)));
  EXPECT_EQ(m.run_id, "");  // no training run named
}

// The run that saved the weights is kept in their metadata and read back
// (what `train --resume` checks a checkpoint against).
TEST(ModelDir, RunIdIsKeptWithTheWeights) {
  Fixture f;
  std::string dir = fresh_dir("model_run_id");
  seq2seq::ModelExtras extras;
  extras.run_id = "0123456789abcdef0123456789abcdef";
  save_model(dir, *f.net, f.config, f.src, f.tgt, extras);
  EXPECT_EQ(load_model(dir).run_id, extras.run_id);
}

// A Bahdanau model (d2l 10.4) round-trips too; its config cannot load a
// Transformer's weights, nor the other way round, and the error names the
// tensor and the sizes.
TEST(ModelDir, BahdanauModelsRoundTripAndAreNotTakenForTransformers) {
  Fixture f;
  ModelConfig c = f.config;
  c.architecture = Architecture::bahdanau;
  c.embed_size = 5;
  c.transformer.num_layers = 2;
  auto net = make_model(c);
  ASSERT_EQ(net->architecture(), "bahdanau");
  std::string dir = fresh_dir("model_bahdanau");
  save_model(dir, *net, c, f.src, f.tgt);
  LoadedModel m = load_model(dir);
  EXPECT_EQ(m.config.architecture, Architecture::bahdanau);
  EXPECT_EQ(m.config.embed_size, 5);
  EXPECT_EQ(m.net->architecture(), "bahdanau");
  autograd::NoGradGuard g;
  net->eval();
  Tensor X = from_vector(std::vector<std::int64_t>{4, 5, 3}, {1, 3});
  Tensor Y = from_vector(std::vector<std::int64_t>{2, 4}, {1, 2});
  Tensor lens = from_vector(std::vector<std::int64_t>{3});
  EXPECT_EQ(to_vector<float>(m.net->forward(X, Y, lens)),
            to_vector<float>(net->forward(X, Y, lens)));
  // A Transformer's weights under a Bahdanau config, and the reverse.
  std::string mixed = fresh_dir("model_mixed");
  save_model(mixed, *f.net, c, f.src, f.tgt);
  try {
    load_model(mixed);
    ADD_FAILURE() << "a Transformer's weights loaded as a Bahdanau model";
  } catch (const IOError& e) {
    EXPECT_NE(
        std::string(e.what()).find("tensor 'encoder.embedding.weight' has shape [7, 8] but "
                                   "config.json (src_vocab_size 7, embed_size 5) needs [7, 5]"),
        std::string::npos)
        << e.what();
  }
  save_model(mixed, *net, f.config, f.src, f.tgt);
  EXPECT_THROW(load_model(mixed), IOError);
}

// A new manifest for the model files `dir` holds now: the manifest vouches
// for an edit, so that a load reaches the checks of the files' content.
void reseal(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& n : kModelFiles)
    if (fs::exists(fs::path(dir) / n)) names.push_back(n);
  io::write_manifest(dir, kModelKind, names);
}

TEST(ModelDir, BadDirectoriesAreClearErrors) {
  Fixture f;
  std::string dir = fresh_dir("model_bad");
  EXPECT_NE(load_error(dir).find("does not exist"), std::string::npos);
  save_model(dir, *f.net, f.config, f.src, f.tgt);
  fs::path d(dir);
  // Missing file.
  fs::rename(d / "tgt_vocab.txt", d / "tgt.bak");
  EXPECT_NE(load_error(dir).find("has no tgt_vocab.txt"), std::string::npos);
  fs::rename(d / "tgt.bak", d / "tgt_vocab.txt");
  // Truncated weights.
  fs::copy_file(d / "model.safetensors", d / "w.bak");
  fs::resize_file(d / "model.safetensors", fs::file_size(d / "model.safetensors") - 10);
  EXPECT_NE(load_error(dir).find("model.safetensors"), std::string::npos);
  reseal(dir);
  EXPECT_NE(load_error(dir).find("model.safetensors"), std::string::npos);
  fs::remove(d / "model.safetensors");
  fs::rename(d / "w.bak", d / "model.safetensors");
  // A config whose shapes do not match the weights names the tensor.
  ModelConfig other = f.config;
  other.transformer.ffn_num_hiddens = 12;
  std::ofstream(d / "config.json") << config_to_json(other);
  // Unsealed, the edit is refused by the manifest; resealed, by the shapes.
  EXPECT_EQ(load_error(dir), "'" + (d / "config.json").string() + "' does not match '" +
                                 (d / "manifest.json").string() +
                                 "' (its SHA-256 differs from the manifest's): the files of '" +
                                 dir + "' do not belong together");
  reseal(dir);
  std::string err = load_error(dir);
  EXPECT_EQ(err, "'" + (d / "model.safetensors").string() +
                     "': tensor 'encoder.blks.block1.ffn.dense1.weight' has shape [16, 8] but "
                     "config.json (num_layers 2, ffn_num_hiddens 12, num_hiddens 8) needs [12, 8]");
  // Bad config values.
  std::ofstream(d / "config.json") << "{\"format\": \"attn-transformer\"";
  reseal(dir);
  EXPECT_NE(load_error(dir).find("not valid JSON"), std::string::npos);
  std::string good = config_to_json(f.config);
  std::string bad = good;
  bad.replace(bad.find("\"num_heads\": 2"), 14, "\"num_heads\": 3");
  std::ofstream(d / "config.json") << bad;
  reseal(dir);
  EXPECT_NE(load_error(dir).find("not divisible"), std::string::npos);
  bad = good;
  bad.replace(bad.find("\"num_layers\": 2"), 15, "\"num_layers\": \"two\"");
  std::ofstream(d / "config.json") << bad;
  reseal(dir);
  EXPECT_NE(load_error(dir).find("\"num_layers\" must be an integer"), std::string::npos);
  // Vocabulary size that disagrees with the config.
  std::ofstream(d / "config.json") << good;
  std::ofstream(d / "src_vocab.txt", std::ios::app) << "extra\n";
  reseal(dir);
  EXPECT_EQ(load_error(dir), "'" + (d / "src_vocab.txt").string() +
                                 "': 8 tokens but config.json says src_vocab_size = 7");
}

namespace {
std::string config_error(const std::string& text) {
  try {
    config_from_json(text, "c.json");
  } catch (const IOError& e) {
    return e.what();
  }
  return "no error";
}

// The fixture's config.json with `key`'s value replaced by `value` (or the key
// removed when value is empty).
std::string with(const std::string& key, const std::string& value) {
  Fixture f;
  std::string text = config_to_json(f.config);
  std::size_t k = text.find("\"" + key + "\": ");
  std::size_t end = text.find_first_of(",\n", k);
  if (value.empty()) {
    std::size_t line = text.rfind('\n', k);
    return text.erase(line, end - line + 1);
  }
  std::size_t begin = k + key.size() + 4;
  return text.replace(begin, end - begin, value);
}
}  // namespace

TEST(ModelConfigJson, EveryBadValueNamesTheKey) {
  Fixture f;
  EXPECT_EQ(config_error(config_to_json(f.config)), "no error");
  EXPECT_EQ(config_error("").rfind("'c.json': not valid JSON: ", 0), 0u);
  EXPECT_EQ(config_error("[1, 2]"), "'c.json': expected a JSON object, got a list of 2 items");
  EXPECT_EQ(config_error("{\"format\": 1}"),
            "'c.json': \"format\" must be \"attn-transformer\", got 1");
  EXPECT_EQ(config_error("{}"), "'c.json': missing \"format\"");
  EXPECT_EQ(config_error(with("num_heads", "")), "'c.json': missing \"num_heads\"");
  EXPECT_EQ(config_error(with("num_layers", "\"two\"")),
            "'c.json': \"num_layers\" must be an integer, got \"two\"");
  EXPECT_EQ(config_error(with("num_layers", "2.5")),
            "'c.json': \"num_layers\" must be an integer, got 2.5");
  EXPECT_EQ(config_error(with("num_hiddens", "-8")),
            "'c.json': \"num_hiddens\" = -8 is outside [1, 65536]");
  EXPECT_EQ(config_error(with("num_heads", "0")),
            "'c.json': \"num_heads\" = 0 is outside [1, 1024]");
  // A value past int64's range is reported as written, not wrapped around.
  EXPECT_EQ(config_error(with("num_hiddens", "18446744073709551615")),
            "'c.json': \"num_hiddens\" = 18446744073709551615 is outside [1, 65536]");
  EXPECT_EQ(config_error(with("num_heads", "3")),
            "'c.json': num_hiddens 8 is not divisible by num_heads 3");
  EXPECT_EQ(config_error(with("num_steps", "1001")),
            "'c.json': num_steps 1001 is more than max_len 1000 (the positional encoding's "
            "positions)");
  EXPECT_EQ(config_error(with("num_steps", "1025")),
            "'c.json': \"num_steps\" = 1025 is outside [2, 1024]");
  EXPECT_EQ(config_error(with("dropout", "1")), "'c.json': \"dropout\" = 1 is outside [0, 0.99]");
  EXPECT_EQ(config_error(with("dropout", "null")),
            "'c.json': \"dropout\" must be a number, got null");
  EXPECT_EQ(config_error(with("use_bias", "")), "'c.json': missing \"use_bias\"");
  std::string wide = with("max_len", "2000");
  wide.replace(wide.find("\"num_hiddens\": 8"), 16, "\"num_hiddens\": 65536");
  EXPECT_EQ(config_error(wide),
            "'c.json': max_len x num_hiddens = 2000 x 65536 positional-encoding entries, more than "
            "the limit of 67108864");
  EXPECT_EQ(config_error(with("format_version", "2")),
            "'c.json': \"format_version\" = 2 is outside [1, 1]");
  std::string twice = config_to_json(f.config);
  twice.insert(twice.find('{') + 1, "\"num_layers\": 7,");
  EXPECT_EQ(config_error(twice), "'c.json': \"num_layers\" appears twice");
}

class ModelDirFiles : public attn::testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    dir = (dir_ / "model").string();
    save_model(dir, *f.net, f.config, f.src, f.tgt);
  }
  // Writes a file of the model and reseals the manifest over it.
  void write(const std::string& name, const std::string& bytes) {
    { std::ofstream(fs::path(dir) / name, std::ios::binary | std::ios::trunc) << bytes; }
    reseal(dir);
  }
  void rewrite_weights(const std::function<void(io::TensorMap&)>& change) {
    std::string path = (fs::path(dir) / "model.safetensors").string();
    io::TensorMap m = io::load_safetensors(path);
    change(m);
    io::save_safetensors(path, m);
    reseal(dir);
  }
  std::string weights() const { return (fs::path(dir) / "model.safetensors").string(); }
  Fixture f;
  std::string dir;
};

TEST_F(ModelDirFiles, WeightsThatLieAboutTheConfigAreNamed) {
  EXPECT_EQ(load_error(dir), "no error");
  rewrite_weights(
      [](io::TensorMap& m) { m.at("decoder.dense.bias").data<float>()[3] = std::nanf(""); });
  EXPECT_EQ(load_error(dir), "'" + weights() +
                                 "': tensor 'decoder.dense.bias' holds NaN at index 3: the weights "
                                 "are corrupt");
  save_model(dir, *f.net, f.config, f.src, f.tgt);
  rewrite_weights([](io::TensorMap& m) { m.erase("decoder.blks.block1.ffn.dense1.weight"); });
  EXPECT_EQ(
      load_error(dir).rfind(
          "'" + weights() + "': tensor 'decoder.blks.block1.ffn.dense1.weight' is missing", 0),
      0u);
  save_model(dir, *f.net, f.config, f.src, f.tgt);
  const std::size_t n = f.net->named_parameters().size();
  rewrite_weights([](io::TensorMap& m) { m.erase("decoder.blks.block0.addnorm2.ln.bias"); });
  EXPECT_EQ(load_error(dir), fmt::format("'{}': tensor 'decoder.blks.block0.addnorm2.ln.bias' is "
                                         "missing (a model of config.json's sizes has {} "
                                         "tensors; this file holds {})",
                                         weights(), n, n - 1));
  // A large tensor missing is named too, not reported as a parameter count.
  save_model(dir, *f.net, f.config, f.src, f.tgt);
  rewrite_weights([](io::TensorMap& m) { m.erase("encoder.blks.block1.attention.W_v.weight"); });
  EXPECT_EQ(load_error(dir), fmt::format("'{}': tensor 'encoder.blks.block1.attention.W_v.weight' "
                                         "is missing (a model of config.json's sizes has {} "
                                         "tensors; this file holds {})",
                                         weights(), n, n - 1));
  save_model(dir, *f.net, f.config, f.src, f.tgt);
  rewrite_weights([](io::TensorMap& m) {
    m["decoder.blks.block0.attention2.W_o.weight"] = zeros({8, 4});
  });
  EXPECT_EQ(load_error(dir), "'" + weights() +
                                 "': tensor 'decoder.blks.block0.attention2.W_o.weight' has shape "
                                 "[8, 4] but config.json's sizes need [8, 8]");
  save_model(dir, *f.net, f.config, f.src, f.tgt);
  rewrite_weights([](io::TensorMap& m) { m["extra"] = zeros({2}); });
  EXPECT_EQ(load_error(dir), "'" + weights() + "': load_state_dict: unexpected parameter 'extra'");
  save_model(dir, *f.net, f.config, f.src, f.tgt);
  rewrite_weights([](io::TensorMap& m) { m["encoder.embedding.weight"] = arange(56, DType::i64); });
  EXPECT_EQ(load_error(dir),
            "'" + weights() + "': tensor 'encoder.embedding.weight' must be F32 or F64, not i64");
  // A config far larger than the weights: named by the first tensor that shows it.
  save_model(dir, *f.net, f.config, f.src, f.tgt);
  ModelConfig big = f.config;
  big.transformer.num_hiddens = 65536;
  big.transformer.max_len = 1000;
  write("config.json", config_to_json(big));
  EXPECT_EQ(load_error(dir),
            "'" + weights() +
                "': tensor 'encoder.embedding.weight' has shape [7, 8] but "
                "config.json (src_vocab_size 7, num_hiddens 65536) needs [7, 65536]");
  ModelConfig deep = f.config;
  deep.transformer.num_layers = 64;
  write("config.json", config_to_json(deep));
  EXPECT_EQ(
      load_error(dir).rfind(
          "'" + weights() + "': tensor 'encoder.blks.block63.ffn.dense1.weight' is missing", 0),
      0u);
}

TEST_F(ModelDirFiles, CheckWeightsBoundsTheModelBeforeAllocatingIt) {
  io::TensorMap m = io::load_safetensors(weights());
  // Every tensor that shows a size is right, but the other blocks are gone:
  // the first tensor the config needs and the file lacks is named.
  ModelConfig c = f.config;
  io::TensorMap lying;
  for (const char* name :
       {"encoder.embedding.weight", "decoder.embedding.weight", "decoder.dense.weight",
        "encoder.blks.block1.ffn.dense1.weight", "decoder.blks.block1.ffn.dense1.weight"})
    lying[name] = m.at(name);
  try {
    check_weights(c, lying, "w.safetensors");
    FAIL();
  } catch (const IOError& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("'w.safetensors': tensor 'encoder.blks.block0.attention.W_q.weight' is "
                          "missing (a model of config.json's sizes has {} tensors; this file "
                          "holds 5)",
                          f.net->named_parameters().size()));
  }
  EXPECT_NO_THROW(check_weights(c, m, "w.safetensors"));
  EXPECT_LE(min_num_parameters(c.transformer), f.net->num_parameters());
  EXPECT_GE(2 * min_num_parameters(c.transformer), f.net->num_parameters());
}

TEST_F(ModelDirFiles, BadVocabulariesAndDirectories) {
  write("tgt_vocab.txt", "<unk>\n<pad>\n<bos>\nw\nx\ny\nz\nv\n");
  EXPECT_EQ(load_error(dir), "'" + (fs::path(dir) / "tgt_vocab.txt").string() +
                                 "': the reserved token <eos> is missing");
  write("tgt_vocab.txt", "");
  EXPECT_EQ(load_error(dir), "'" + (fs::path(dir) / "tgt_vocab.txt").string() + "' is empty");
  write("config.json", "");
  EXPECT_EQ(load_error(dir), "'" + (fs::path(dir) / "config.json").string() + "' is empty");
  std::string file = (dir_ / "a-file").string();
  std::ofstream(file) << "x";
  EXPECT_EQ(load_error(file), "model directory '" + file + "' is not a directory");
}

TEST_F(ModelDirFiles, SaveWritesAllFilesOrNone) {
  EXPECT_EQ(names(), (std::vector<std::string>{"model"}));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files,
            (std::vector<std::string>{".lock", "config.json", "manifest.json", "model.safetensors",
                                      "src_vocab.txt", "tgt_vocab.txt"}));
  // A vocabulary that cannot be written: nothing is written, and the new
  // directory is removed again.
  data::Vocab bad = data::Vocab::from_tokens({"<unk>", "<pad>", "<bos>", "<eos>", "a\nb"});
  std::string fresh = (dir_ / "fresh").string();
  EXPECT_THROW(save_model(fresh, *f.net, f.config, f.src, bad), ValueError);
  EXPECT_FALSE(fs::exists(fresh));
  // Over an existing model: it stays as it was, with no temp file beside it.
  std::string before = attn::testing::read_file(fs::path(dir) / "src_vocab.txt");
  data::Vocab other({{"p", "q", "r"}}, 1, data::kReservedTokens);
  EXPECT_THROW(save_model(dir, *f.net, f.config, other, bad), ValueError);
  EXPECT_EQ(attn::testing::read_file(fs::path(dir) / "src_vocab.txt"), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 6);
}

// Files that do not belong together are refused, naming the file: an edit,
// two vocabulary lines swapped, weights of another model of the same shapes.
TEST_F(ModelDirFiles, FilesThatDoNotBelongTogetherAreRefused) {
  const fs::path d(dir);
  auto expect_mismatch = [&](const std::string& name) {
    std::string err = load_error(dir);
    EXPECT_EQ(err.rfind("'" + (d / name).string() + "' does not match '" +
                            (d / "manifest.json").string() + "' (",
                        0),
              0u)
        << err;
    EXPECT_NE(err.find("do not belong together"), std::string::npos) << err;
  };
  const std::string vocab = attn::testing::read_file(d / "src_vocab.txt");
  std::string swapped = vocab;
  std::size_t a = swapped.find("<eos>\n") + 6, b = swapped.find('\n', a) + 1,
              c = swapped.find('\n', b) + 1;
  swapped = swapped.substr(0, a) + swapped.substr(b, c - b) + swapped.substr(a, b - a) +
            swapped.substr(c);
  ASSERT_NE(swapped, vocab);
  ASSERT_EQ(swapped.size(), vocab.size());
  { std::ofstream(d / "src_vocab.txt", std::ios::binary | std::ios::trunc) << swapped; }
  expect_mismatch("src_vocab.txt");
  save_model(dir, *f.net, f.config, f.src, f.tgt);
  EXPECT_EQ(load_error(dir), "no error");
  manual_seed(99);
  nn::EncoderDecoder other(f.config.transformer);
  io::TensorMap t;
  for (auto& [name, p] : other.named_parameters()) t.emplace(name, p.detach());
  io::save_safetensors(weights(), t, {{"format", "pt"}});
  expect_mismatch("model.safetensors");
  // Without a manifest nothing is loaded; write_model_manifest checks the
  // files as load_model would and then vouches for them.
  fs::remove(d / "manifest.json");
  EXPECT_EQ(load_error(dir), "'" + dir +
                                 "' has no manifest.json: its files cannot be checked to "
                                 "belong together");
  write_model_manifest(dir);
  EXPECT_EQ(load_error(dir), "no error");
  { std::ofstream(d / "config.json", std::ios::app) << "{"; }
  fs::remove(d / "manifest.json");
  EXPECT_THROW(write_model_manifest(dir), IOError);
  EXPECT_FALSE(fs::exists(d / "manifest.json"));
}

// attn convert's storage: bf16 and int8 weights are read back as f32, the
// int8 ones equal to the quantized values times their row scales, and a
// model so stored records what it was; the languages round-trip.
TEST(ModelDir, WeightsStoredInBf16AndInt8ReadBackAsF32) {
  Fixture f;
  f.config.source_lang = "en";
  f.config.target_lang = "fr";
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : f.net->named_parameters()) params.emplace(name, p.detach());
  for (WeightsDType dtype : {WeightsDType::f32, WeightsDType::bf16, WeightsDType::int8}) {
    const std::string dir = fresh_dir(std::string("model_") + weights_dtype_name(dtype));
    ModelExtras extras;
    extras.weights = dtype;
    save_model(dir, *f.net, f.config, f.src, f.tgt, extras);
    LoadedModel m = load_model(dir);
    EXPECT_EQ(m.weights, dtype);
    EXPECT_EQ(m.config.source_lang, "en");
    EXPECT_EQ(m.config.target_lang, "fr");
    for (auto& [name, p] : m.net->named_parameters()) {
      const Tensor& want = params.at(name);
      const std::vector<float> got = to_vector<float>(p), orig = to_vector<float>(want);
      if (dtype == WeightsDType::f32 || want.dim() < 2) {
        EXPECT_EQ(got, orig) << name;
        continue;
      }
      if (dtype == WeightsDType::bf16) {
        for (std::size_t i = 0; i < got.size(); ++i)
          EXPECT_NEAR(got[i], orig[i], std::fabs(orig[i]) / 256) << name << " " << i;
        continue;
      }
      const QuantizedRows q = quantize_rows_int8(want, name);
      const std::vector<float> v = to_vector<float>(q.values), s = to_vector<float>(q.scales);
      const std::int64_t K = want.size(1);
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i], v[i] * s[i / K]) << name << " " << i;
        EXPECT_LE(std::fabs(got[i] - orig[i]), s[i / K] / 2 * 1.0001f) << name << " " << i;
      }
    }
  }
  // A quarter of the f32 bytes in int8, about half in bf16, once the
  // weights outweigh the header (num_hiddens 64).
  ModelConfig big = f.config;
  big.transformer.num_hiddens = 64;
  big.transformer.ffn_num_hiddens = 128;
  auto net = std::make_shared<nn::EncoderDecoder>(big.transformer);
  std::map<WeightsDType, std::uintmax_t> bytes;
  for (WeightsDType dtype : {WeightsDType::f32, WeightsDType::bf16, WeightsDType::int8}) {
    const std::string dir = fresh_dir(std::string("model_big_") + weights_dtype_name(dtype));
    ModelExtras extras;
    extras.weights = dtype;
    save_model(dir, *net, big, f.src, f.tgt, extras);
    bytes[dtype] = fs::file_size(fs::path(dir) / kWeightsFile);
  }
  EXPECT_LT(bytes[WeightsDType::int8], bytes[WeightsDType::f32] * 3 / 10);
  EXPECT_LT(bytes[WeightsDType::bf16], bytes[WeightsDType::f32] * 6 / 10);
}

// An int8 matrix without its scales, or scales that cannot be, are named.
TEST(ModelDir, Int8WeightsWithoutTheirScalesAreRefused) {
  Fixture f;
  const std::string dir = fresh_dir("model_int8_bad");
  ModelExtras extras;
  extras.weights = WeightsDType::int8;
  save_model(dir, *f.net, f.config, f.src, f.tgt, extras);
  const fs::path weights = fs::path(dir) / kWeightsFile;
  io::StoredTypes stored;
  io::TensorMap t = io::load_safetensors(weights.string(), nullptr, &stored);
  auto rewrite_and_load = [&](io::TensorMap tensors) -> std::string {
    io::save_safetensors(weights.string(), tensors, {{"format", "pt"}}, false, stored);
    try {
      seq2seq::write_model_manifest(dir);  // (it checks the files as load_model does)
      load_model(dir);
    } catch (const IOError& e) {
      return e.what();
    }
    return "no error";
  };
  io::TensorMap missing = t;
  missing.erase(std::string("decoder.dense.weight") + kScaleSuffix);
  EXPECT_NE(std::string(rewrite_and_load(missing))
                .find("tensor 'decoder.dense.weight' is stored as I8 but "
                      "'decoder.dense.weight.scale' (its scales) is missing"),
            std::string::npos);
  io::TensorMap negative = t;
  negative[std::string("decoder.dense.weight") + kScaleSuffix] =
      full({f.config.transformer.tgt_vocab_size}, -1.0, DType::f32);
  EXPECT_NE(std::string(rewrite_and_load(negative))
                .find("holds -1 at row 0: a scale must be finite and positive"),
            std::string::npos);
}

TEST(ModelConfigJson, LanguagesAreIsoCodesAndOptional) {
  ModelConfig c = Fixture().config;
  c.source_lang = "en";
  c.target_lang = "fr";
  const std::string text = config_to_json(c);
  EXPECT_EQ(config_from_json(text, "c.json").source_lang, "en");
  nlohmann::json j = nlohmann::json::parse(text);
  j.erase("source_lang");
  j.erase("target_lang");
  EXPECT_EQ(config_from_json(j.dump(), "c.json").source_lang, "");  // an older model's
  for (const char* bad : {"EN", "eng", "e"}) {
    j["source_lang"] = bad;
    j["target_lang"] = "fr";
    try {
      config_from_json(j.dump(), "c.json");
      ADD_FAILURE() << bad;
    } catch (const IOError& e) {
      EXPECT_NE(std::string(e.what()).find("is not an ISO 639-1 code"), std::string::npos) << bad;
    }
  }
  j["source_lang"] = "fr";
  try {
    config_from_json(j.dump(), "c.json");
    ADD_FAILURE() << "equal languages";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("source_lang and target_lang are both 'fr'"),
              std::string::npos);
  }
}
