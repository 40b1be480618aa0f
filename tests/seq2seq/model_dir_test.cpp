#include "attn/seq2seq/model_dir.h"

#include <filesystem>
#include <fstream>

#include "attn/autograd/node.h"
#include "attn/data/nmt.h"
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
  fs::remove(d / "model.safetensors");
  fs::rename(d / "w.bak", d / "model.safetensors");
  // A config whose shapes do not match the weights names the tensor.
  ModelConfig other = f.config;
  other.transformer.ffn_num_hiddens = 12;
  std::ofstream(d / "config.json") << config_to_json(other);
  std::string err = load_error(dir);
  EXPECT_NE(err.find("encoder.blks.block0.ffn.dense1.weight"), std::string::npos) << err;
  // Bad config values.
  std::ofstream(d / "config.json") << "{\"format\": \"attn-transformer\"";
  EXPECT_NE(load_error(dir).find("not valid JSON"), std::string::npos);
  std::string good = config_to_json(f.config);
  std::string bad = good;
  bad.replace(bad.find("\"num_heads\": 2"), 14, "\"num_heads\": 3");
  std::ofstream(d / "config.json") << bad;
  EXPECT_NE(load_error(dir).find("not divisible"), std::string::npos);
  bad = good;
  bad.replace(bad.find("\"num_layers\": 2"), 15, "\"num_layers\": \"two\"");
  std::ofstream(d / "config.json") << bad;
  EXPECT_NE(load_error(dir).find("\"num_layers\" must be an integer"), std::string::npos);
  // Vocabulary size that disagrees with the config.
  std::ofstream(d / "config.json") << good;
  std::ofstream(d / "src_vocab.txt", std::ios::app) << "extra\n";
  EXPECT_NE(load_error(dir).find("src_vocab.txt has 8 tokens but config.json says 7"),
            std::string::npos);
}
