#include <cmath>

#include "attn/nn/init.h"
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
    nn::xavier_init(net, default_generator());
    seq2seq::TrainOptions t;
    t.num_epochs = 15;
    t.seed = 1;
    return seq2seq::train_seq2seq(net, data, t).epoch_losses;
  };
  auto a = run(), b = run();
  EXPECT_EQ(a, b);
  EXPECT_LT(a.back(), 0.6 * a.front());
}

// Targets that are the word "<pad>" have valid length 0 (d2l's count of
// non-<pad> ids): a batch of them has no loss and no tokens, which must not
// become 0/0, and a corpus of nothing else is refused before training.
TEST(Trainer, PadOnlyTargetsAreNoTokensNotNaN) {
  data::NmtOptions o;
  o.num_steps = 1;
  o.num_examples = 0;
  std::string text = "go .\tva !\n";
  for (int i = 0; i < 8; ++i) text += "hi .\t<pad>\n";
  data::NmtData data = data::make_data_nmt(text, "'pad.txt'", o);
  EXPECT_EQ(data.tgt.valid_len.at({1}), 0.0);
  auto make_net = [](const data::NmtData& d) {
    nn::TransformerConfig c;
    c.src_vocab_size = static_cast<std::int64_t>(d.src_vocab.size());
    c.tgt_vocab_size = static_cast<std::int64_t>(d.tgt_vocab.size());
    return nn::EncoderDecoder(c);
  };
  manual_seed(3);
  nn::EncoderDecoder net = make_net(data);
  seq2seq::TrainOptions t;
  t.num_epochs = 2;
  t.batch_size = 2;  // several batches of "<pad>" targets only
  seq2seq::TrainResult r = seq2seq::train_seq2seq(net, data, t);
  ASSERT_EQ(r.step_losses.size(), 10u);
  for (double l : r.step_losses) EXPECT_TRUE(std::isfinite(l));
  for (double l : r.epoch_losses) EXPECT_TRUE(std::isfinite(l));

  data::NmtData none = data::make_data_nmt("hi .\t<pad>\nyo .\t<pad>\n", "'pad.txt'", o);
  nn::EncoderDecoder net2 = make_net(none);
  try {
    seq2seq::train_seq2seq(net2, none, t);
    FAIL() << "trained on targets of <pad> only";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "train: the target sentences hold no token but <pad>: nothing to learn");
  }
}
