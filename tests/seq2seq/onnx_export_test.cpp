// ONNX export: the graph written by export_onnx, run in ONNX Runtime
// (onnxruntime-node, through tools/onnx_translate.mjs), gives attn's logits
// at every greedy step to 1e-4 and the same translations.
#include "attn/seq2seq/onnx_export.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <tuple>

#include "apps/spawn.h"
#include "attn/data/text.h"
#include "attn/nn/init.h"
#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translate.h"
#include "testing.h"

using namespace attn;
using namespace attn::seq2seq;
namespace fs = std::filesystem;

namespace {

const std::string kSource = ATTN_SOURCE_DIR;
const std::string kCorpus = kSource + "/datasets/fra-eng/fra.txt.gz";
constexpr double kLogitTolerance = 1e-4;

// A d2l-sized Transformer trained briefly on the bundled corpus.
// The cases run in ONNX Runtime: d2l's model with and without the
// projections' biases, and one with rotary positions.
struct Case {
  bool use_bias;
  nn::Positions positions;
};

void PrintTo(const Case& k, std::ostream* os) {
  *os << "use_bias " << k.use_bias << ", positions " << enum_name(k.positions);
}

LoadedModel trained_model(const Case& k) {
  const bool use_bias = k.use_bias;
  data::NmtOptions o;
  o.num_examples = 300;
  data::NmtData data = data::load_data_nmt(kCorpus, o);
  manual_seed(use_bias ? 11 : 5);
  LoadedModel m;
  auto& c = m.config.transformer;
  c.src_vocab_size = static_cast<std::int64_t>(data.src_vocab.size());
  c.tgt_vocab_size = static_cast<std::int64_t>(data.tgt_vocab.size());
  c.use_bias = use_bias;
  c.positions = k.positions;
  m.config.num_steps = o.num_steps;
  m.net = std::make_shared<nn::EncoderDecoder>(c);
  nn::xavier_init(*m.net, default_generator());
  TrainOptions t;
  t.num_epochs = 30;
  t.seed = 3;
  train_seq2seq(*m.net, data, t);
  m.net->eval();
  m.src_vocab = data.src_vocab;
  m.tgt_vocab = data.tgt_vocab;
  return m;
}

// Pairs of the training data and far beyond it (unknown words), and
// sentences longer than num_steps.
std::vector<std::string> test_sentences() {
  data::ParallelCorpus corpus = data::read_parallel_corpus(kCorpus, 5100);
  std::vector<std::string> out;
  for (std::size_t i :
       {0,   1,   2,   3,    40,   41,   42,   43,   44,   45,   100,  101,  102,  250,  251,
        252, 299, 300, 2000, 2001, 2002, 4000, 4001, 5000, 5001, 5002, 5003, 5004, 5005, 5006}) {
    std::string s;
    for (const auto& w : corpus.source.at(i)) s += (s.empty() ? "" : " ") + w;
    out.push_back(s);
  }
  out.push_back("i think that we should go home now because it is late .");
  out.push_back("Tom, Mary and I saw the zyzzyva!");
  return out;
}

// translate_greedy's loop, keeping every step's token ids and logits (B, V).
struct Steps {
  std::vector<std::vector<std::int64_t>> ids;
  std::vector<Tensor> logits;
};
Steps greedy_steps(const LoadedModel& m, const std::vector<std::string>& sentences) {
  autograd::NoGradGuard no_grad;
  const std::int64_t B = static_cast<std::int64_t>(sentences.size()), T = m.config.num_steps;
  std::vector<std::int64_t> src_ids, lens;
  for (const auto& s : sentences) {
    auto [ids, len] = encode_source(m.src_vocab, data::split_spaces(data::preprocess_nmt(s)), T);
    for (auto id : to_vector<std::int64_t>(ids)) src_ids.push_back(id);
    lens.push_back(len.item<std::int64_t>());
  }
  Tensor src = from_vector(src_ids, {B, T}), valid = from_vector(lens);
  nn::DecoderState state = m.net->begin(src, valid);
  const std::int64_t eos = m.tgt_vocab["<eos>"];
  Tensor X = full({B, 1}, static_cast<double>(m.tgt_vocab["<bos>"]), DType::i64);
  std::vector<bool> done(B, false);
  Steps out;
  for (std::int64_t t = 0; t < T && std::count(done.begin(), done.end(), false) > 0; ++t) {
    Tensor logits = m.net->step(X, state);  // (B, 1, V)
    X = argmax(logits, 2);
    out.logits.push_back(logits.reshape({B, -1}).contiguous());
    out.ids.push_back(to_vector<std::int64_t>(X));
    for (std::int64_t b = 0; b < B; ++b) done[b] = done[b] || out.ids.back()[b] == eos;
  }
  return out;
}

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    fs::path p = fs::path(dir.empty() ? "." : dir) / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> out;
  std::stringstream in(attn::testing::read_file(p));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class OnnxRuntime : public attn::testing::TempDirTest, public ::testing::WithParamInterface<Case> {
 protected:
  // Runs tools/onnx_translate.mjs with `args`; its stdout lines.
  std::vector<std::string> run_node(const std::vector<std::string>& args, const std::string& log) {
    std::vector<std::string> all = {kSource + "/tools/onnx_translate.mjs"};
    all.insert(all.end(), args.begin(), args.end());
    pid_t pid = attn::testing::spawn_attn(node_, all, dir_ / log);
    EXPECT_GT(pid, 0);
    int rc = attn::testing::exit_code(attn::testing::wait_status(pid));
    EXPECT_EQ(rc, 0) << attn::testing::read_file(dir_ / (log + ".err"));
    return lines_of(dir_ / (log + ".out"));
  }
  std::string node_;
};

}  // namespace

TEST(OnnxExport, WritesEveryWeightAndBothVocabularies) {
  for (bool use_bias : {false, true})
    for (std::int64_t layers : {1, 3}) {
      LoadedModel m;
      auto& c = m.config.transformer;
      c.src_vocab_size = 6;
      c.tgt_vocab_size = 7;
      c.num_hiddens = 8;
      c.num_heads = 2;
      c.ffn_num_hiddens = 12;
      c.num_layers = layers;
      c.max_len = 20;
      c.use_bias = use_bias;
      m.net = std::make_shared<nn::EncoderDecoder>(c);
      m.src_vocab = data::Vocab::from_tokens({"<unk>", "<pad>", "<bos>", "<eos>", "a", "b"});
      m.tgt_vocab = data::Vocab::from_tokens({"x", "<eos>", "<pad>", "<bos>", "y", "<unk>", "z"});
      std::string bytes = onnx_model_bytes(m);
      // ModelProto's first fields: ir_version (1) 8, producer_name (2) "attn".
      EXPECT_EQ(bytes.substr(0, 8), std::string("\x08\x08\x12\x04") + "attn");
      // Every weight is in it once (transposed or not), plus the positional table.
      const std::int64_t floats = m.net->num_parameters() + c.max_len * c.num_hiddens;
      EXPECT_GT(bytes.size(), static_cast<std::size_t>(4 * floats));
      EXPECT_LT(bytes.size(), static_cast<std::size_t>(4 * floats + 64 * 1024));
      EXPECT_NE(bytes.find("present_cross_value." + std::to_string(layers - 1)), std::string::npos);
      EXPECT_NE(bytes.find("attn.tgt_vocab"), std::string::npos);
    }
}

TEST(OnnxExport, RefusesWhatTheGraphCannotHold) {
  LoadedModel m;
  auto& c = m.config.transformer;
  c.src_vocab_size = c.tgt_vocab_size = 6;
  c.num_hiddens = 4;
  c.num_heads = 2;
  c.num_layers = 1;
  c.max_len = 8;
  c.norm_shape = {3, 4};  // a layer norm over two dims
  m.net = std::make_shared<nn::EncoderDecoder>(c);
  try {
    onnx_model_bytes(m);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_EQ(std::string(e.what()),
              "ONNX export: layer norms over [3, 4] are not supported (only over the last dim, 4)");
  }
  c.norm_shape = {};
  for (auto [positions, kv_heads, name] :
       {std::tuple{nn::Positions::learned, 0, "learned, --num-kv-heads 2"},
        std::tuple{nn::Positions::alibi, 0, "alibi, --num-kv-heads 2"},
        std::tuple{nn::Positions::relative, 0, "relative, --num-kv-heads 2"},
        std::tuple{nn::Positions::rotary, 1, "rotary, --num-kv-heads 1"}}) {
    c.positions = positions;
    c.num_kv_heads = kv_heads;
    m.net = std::make_shared<nn::EncoderDecoder>(c);
    try {
      onnx_model_bytes(m);
      FAIL() << name;
    } catch (const ValueError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("ONNX export: only sinusoidal or rotary positions with full key/value "
                            "heads are exported (this model: --positions ") +
                    name + ")");
    }
  }
}

TEST_P(OnnxRuntime, GivesAttnsLogitsAndTranslations) {
  node_ = find_on_path("node");
  if (node_.empty()) GTEST_SKIP() << "Node.js (node) is not installed: ONNX Runtime cannot run";
  ASSERT_TRUE(fs::exists(kSource + "/tools/node_modules/onnxruntime-node/package.json"))
      << "onnxruntime-node is not installed in tools/node_modules: run scripts/install-deps.sh";

  const Case k = GetParam();
  LoadedModel m = trained_model(k);
  const std::string onnx = (dir_ / "model.onnx").string();
  export_onnx(m, onnx);
  const std::vector<std::string> sentences = test_sentences();

  // attn: every greedy step's ids and logits, and the translations.
  Steps want = greedy_steps(m, sentences);
  std::vector<std::string> want_text;
  for (const auto& t :
       translate_greedy(*m.net, m.src_vocab, m.tgt_vocab, sentences, m.config.num_steps))
    want_text.push_back(t.text);

  // ONNX Runtime: all sentences in one batch, every step dumped.
  std::vector<std::string> args = {onnx, "--threads", "1", "--dump", (dir_ / "dump.json").string()};
  args.insert(args.end(), sentences.begin(), sentences.end());
  EXPECT_EQ(run_node(args, "one-batch"), want_text);
  nlohmann::json dump = nlohmann::json::parse(attn::testing::read_file(dir_ / "dump.json"));
  const std::int64_t B = static_cast<std::int64_t>(sentences.size());
  const std::int64_t V = m.config.transformer.tgt_vocab_size;
  ASSERT_EQ(dump["batch"].get<std::int64_t>(), B);
  ASSERT_EQ(dump["vocab"].get<std::int64_t>(), V);
  ASSERT_EQ(dump["steps"].size(), want.ids.size());
  double max_diff = 0;
  for (std::size_t t = 0; t < want.ids.size(); ++t) {
    const auto& step = dump["steps"][t];
    EXPECT_EQ(step["ids"].get<std::vector<std::int64_t>>(), want.ids[t]) << "step " << t;
    std::vector<double> got = step["logits"].get<std::vector<double>>();
    std::vector<float> ref = to_vector<float>(want.logits[t]);
    ASSERT_EQ(got.size(), ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i)
      max_diff = std::max(max_diff, std::abs(got[i] - static_cast<double>(ref[i])));
  }
  const double prefill = dump["prefill_max_diff"].get<double>();
  const double trimmed = dump["trimmed_max_diff"].get<double>();
  std::cout << "ONNX Runtime against attn (use_bias " << k.use_bias << ", positions "
            << enum_name(k.positions) << "): " << B << " sentences, " << want.ids.size()
            << " steps, logits max |diff| " << max_diff
            << "; in ONNX Runtime, the whole prefix in one call against the steps: " << prefill
            << ", sources cut to " << dump["trimmed_src_len"].get<std::int64_t>()
            << " tokens: " << trimmed << "\n";
  EXPECT_LE(max_diff, kLogitTolerance);
  EXPECT_LE(prefill, kLogitTolerance);  // tgt_len > 1 with the causal mask
  EXPECT_LE(trimmed, kLogitTolerance);  // another src_len
  const std::int64_t trimmed_len = dump["trimmed_src_len"].get<std::int64_t>();
  EXPECT_GT(trimmed_len, 0);
  EXPECT_LT(trimmed_len, m.config.num_steps);

  // Batches of 7 (the last one shorter): the same translations.
  args = {onnx, "--threads", "2", "--batch", "7"};
  args.insert(args.end(), sentences.begin(), sentences.end());
  EXPECT_EQ(run_node(args, "batches-of-7"), want_text);
}

INSTANTIATE_TEST_SUITE_P(Models, OnnxRuntime,
                         ::testing::Values(Case{false, nn::Positions::sinusoidal},
                                           Case{true, nn::Positions::sinusoidal},
                                           Case{false, nn::Positions::rotary}),
                         [](const auto& info) {
                           const Case& k = info.param;
                           return std::string(k.use_bias ? "Biases" : "NoBiases") +
                                  (k.positions == nn::Positions::rotary ? "Rotary" : "");
                         });
