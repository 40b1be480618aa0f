#include "attn/seq2seq/bleu.h"
#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translate.h"
#include "testing.h"

using namespace attn;

namespace {
const std::string kCorpus = std::string(ATTN_SOURCE_DIR) + "/datasets/fra-eng/fra.txt.gz";
}

// A short d2l run: the loss falls and the same seed gives the same losses.
TEST(Trainer, LossFallsAndIsReproducible) {
  data::NmtOptions o;
  o.num_examples = 200;
  data::NmtData data = data::load_data_nmt(kCorpus, o);
  auto run = [&]() {
    manual_seed(1);
    nn::TransformerConfig c;
    c.src_vocab_size = static_cast<std::int64_t>(data.src_vocab.size());
    c.tgt_vocab_size = static_cast<std::int64_t>(data.tgt_vocab.size());
    nn::EncoderDecoder net(c);
    seq2seq::xavier_init(net, default_generator());
    seq2seq::TrainOptions t;
    t.num_epochs = 15;
    t.seed = 1;
    return seq2seq::train_seq2seq(net, data, t).epoch_losses;
  };
  auto a = run(), b = run();
  EXPECT_EQ(a, b);
  EXPECT_LT(a.back(), 0.6 * a.front());
}
