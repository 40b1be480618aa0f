// examples/consumer/guide.cpp — the code of docs/using-libattn.md as one
// program that uses an installed libattn the way any other program would:
// built by this directory's CMakeLists.txt (find_package(attn)) or by
// `c++ guide.cpp $(pkg-config --cflags --libs attn)`. examples/consumer/run.sh
// builds and runs it against a staged install (the test consumer_install).
//
//   guide CORPUS OUT_DIR    CORPUS: an English<TAB>French file (plain or gzip),
//                           OUT_DIR: where the trained model is written
//
// Each snippet of the guide lies between two `// [name]` lines; the test
// docs_guide_snippets_test checks that every code block of the guide is one of
// them, word for word. What the guide says a snippet computes is checked
// here, after it: the program exits 1 when a check fails.
#include <attn/attn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::cout << (ok ? "ok: " : "FAILED: ") << what << "\n";
  if (!ok) ++failures;
}

void errors() {
  // [errors]
  try {
    attn::matmul(attn::zeros({2, 3}), attn::zeros({4, 5}));
  } catch (const attn::ShapeError& e) {  // every attn::Error names the function
    std::cout << e.what() << "\n";  // matmul: inner dimensions differ: a is [2, 3], b is [4, 5]
  }
  // [errors]
  std::string message;
  try {
    attn::matmul(attn::zeros({2, 3}), attn::zeros({4, 5}));
  } catch (const attn::ShapeError& e) {
    message = e.what();
  }
  check(message == "matmul: inner dimensions differ: a is [2, 3], b is [4, 5]",
        "matmul's ShapeError names the function and both shapes");
}

void tensors() {
  // [tensors]
  attn::Tensor x = attn::arange(12, attn::DType::f32).reshape({3, 4});  // a view, no copy
  attn::Tensor y = x * 2.0 + 1.0;  // elementwise; broadcasting as in PyTorch
  attn::Tensor s = attn::sum(y, {1});  // the row sums, shape (3)
  std::cout << s << "\n";  // tensor([16., 48., 80.])
  // [tensors]
  check(attn::to_vector<float>(s) == std::vector<float>{16, 48, 80}, "row sums 16, 48, 80");
  check(x.reshape({12}).storage() == x.storage(), "reshape of a contiguous tensor is a view");
}

void autograd() {
  // [autograd]
  attn::Tensor w = attn::tensor({1, 2, 3});
  w.requires_grad_();
  attn::Tensor loss = attn::sum(w * w);  // records the graph as it computes
  loss.backward();
  std::cout << w.grad() << "\n";  // d loss / d w = 2 w: tensor([2., 4., 6.])
  {
    attn::autograd::NoGradGuard no_grad;  // nothing below is recorded
    attn::Tensor updated = w - 0.1 * w.grad();
    std::cout << updated.requires_grad() << "\n";  // 0
  }
  // [autograd]
  check(attn::to_vector<float>(w.grad()) == std::vector<float>{2, 4, 6}, "gradient 2 w");
}

// [module]
// A module registers its parameters and children by name, as PyTorch does:
// parameters() finds them, state_dict() names them ("hidden.weight", ...).
class Mlp : public attn::nn::Module {
 public:
  Mlp(std::int64_t in, std::int64_t hidden_size, std::int64_t out)
      : hidden(register_module("hidden", std::make_shared<attn::nn::Linear>(in, hidden_size))),
        output(register_module("output", std::make_shared<attn::nn::Linear>(hidden_size, out))) {}

  attn::Tensor forward(const attn::Tensor& x) const { return (*output)(attn::relu((*hidden)(x))); }

  std::shared_ptr<attn::nn::Linear> hidden, output;
};
// [module]

void training_loop() {
  // [training-loop]
  attn::manual_seed(0);  // every random draw of attn follows from the seed
  attn::Tensor x = attn::uniform(-3, 3, {256, 1}, attn::default_generator());
  attn::Tensor y = attn::sin(x);
  Mlp net(1, 32, 1);
  attn::optim::Adam adam(net.parameters(), /*lr=*/0.01);
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    attn::Tensor err = net.forward(x) - y;
    attn::Tensor loss = attn::mean(err * err);
    adam.zero_grad();
    loss.backward();
    adam.step();
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  std::cout << "mse " << first << " -> " << last << "\n";
  // [training-loop]
  check(last < first / 10, "the training loop lowers the loss tenfold");
  check(net.state_dict().count("hidden.weight") == 1, "state_dict names hidden.weight");
}

// Trains d2l's Transformer briefly, saves it, loads it and translates.
void transformer(const std::string& corpus, const std::string& out_dir) {
  // [train]
  attn::data::NmtOptions data_options;  // d2l's: 600 pairs cut to 10 tokens
  attn::data::NmtData data = attn::data::load_data_nmt(corpus, data_options);

  attn::nn::TransformerConfig config;  // d2l's: 2 layers, 32 hidden units, 4 heads
  config.src_vocab_size = static_cast<std::int64_t>(data.src_vocab.size());
  config.tgt_vocab_size = static_cast<std::int64_t>(data.tgt_vocab.size());
  attn::nn::EncoderDecoder net(config);
  attn::nn::xavier_init(net);

  attn::seq2seq::TrainOptions options;  // d2l's: Adam, lr 0.005, batch 64, clipping at 1
  options.num_epochs = 30;  // d2l trains 200
  attn::seq2seq::TrainResult result = attn::seq2seq::train_seq2seq(net, data, options);
  std::cout << "loss " << result.epoch_losses.front() << " -> " << result.final_loss << "\n";

  attn::seq2seq::ModelConfig model_config{config, data_options.num_steps};
  attn::seq2seq::save_model(out_dir, net, model_config, data.src_vocab, data.tgt_vocab);
  // [train]
  check(result.final_loss < result.epoch_losses.front() / 2, "training halves the loss");

  // [translate]
  attn::seq2seq::LoadedModel model = attn::seq2seq::load_model(out_dir);
  std::vector<attn::seq2seq::Translation> translations = attn::seq2seq::translate_greedy(
      *model.net, model.src_vocab, model.tgt_vocab, {"go .", "i lost ."}, model.config.num_steps);
  for (const attn::seq2seq::Translation& t : translations)
    std::cout << t.source << " => " << t.text << "\n";
  // [translate]
  std::vector<attn::seq2seq::Translation> before = attn::seq2seq::translate_greedy(
      net, data.src_vocab, data.tgt_vocab, {"go .", "i lost ."}, data_options.num_steps);
  bool same = before.size() == translations.size();
  for (std::size_t i = 0; same && i < before.size(); ++i)
    same = before[i].tokens == translations[i].tokens;
  check(same, "the loaded model translates as the trained one");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: guide CORPUS OUT_DIR\n";
    return 2;
  }
  // The headers and the library linked in are the same version.
  check(std::strcmp(attn::version(), ATTN_VERSION_STRING) == 0,
        std::string("library ") + attn::version() + ", headers " + ATTN_VERSION_STRING);
  try {
    errors();
    tensors();
    autograd();
    training_loop();
    transformer(argv[1], argv[2]);
  } catch (const attn::Error& e) {
    std::cerr << "guide: " << e.what() << "\n";
    return 1;
  }
  std::cout << (failures == 0 ? "all checks passed\n" : "some checks FAILED\n");
  return failures == 0 ? 0 : 1;
}
