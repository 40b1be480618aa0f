// Training the d2l Transformer through the fused attention kernels follows the
// same loss curve as through the materialized path (KeepAttentionWeights):
// same initial weights, same data order, same dropout masks; only the order
// of floating-point sums differs. Those differences (1e-8 relative after the
// first epoch) grow as training goes on — Adam divides each update by the
// gradient's running scale, so tiny gradients of either sign take full-size
// steps — and after a few epochs the two runs are two samples of the same
// curve. So: the first epochs agree to float tolerance, the rest in level.
#include <cmath>
#include <optional>

#include "attn/nn/attention.h"
#include "attn/nn/init.h"
#include "attn/seq2seq/trainer.h"
#include "testing.h"

using namespace attn;

namespace {
const std::string kCorpus = std::string(ATTN_SOURCE_DIR) + "/datasets/fra-eng/fra.txt.gz";

std::vector<double> losses(const data::NmtData& data, bool materialized) {
  std::optional<nn::KeepAttentionWeights> keep;
  if (materialized) keep.emplace();
  manual_seed(3);
  nn::TransformerConfig c;
  c.src_vocab_size = static_cast<std::int64_t>(data.src_vocab.size());
  c.tgt_vocab_size = static_cast<std::int64_t>(data.tgt_vocab.size());
  nn::EncoderDecoder net(c);  // d2l's preset: dropout 0.1 on the attention weights too
  nn::xavier_init(net, default_generator());
  seq2seq::TrainOptions t;
  t.num_epochs = 20;
  t.seed = 3;
  return seq2seq::train_seq2seq(net, data, t).epoch_losses;
}
}  // namespace

TEST(FusedAttention, TrainingLossCurveEqualsTheMaterializedPath) {
  data::NmtOptions o;
  o.num_examples = 300;
  data::NmtData data = data::load_data_nmt(kCorpus, o);
  std::vector<double> fused = losses(data, false), reference = losses(data, true);
  ASSERT_EQ(fused.size(), reference.size());
  for (std::size_t e = 0; e < 3; ++e)
    EXPECT_NEAR(fused[e], reference[e], 1e-5 * reference[e]) << "epoch " << e + 1;
  for (std::size_t e = 3; e < fused.size(); ++e)
    EXPECT_NEAR(fused[e], reference[e], 0.1 * reference[e]) << "epoch " << e + 1;
  double tail_f = 0, tail_r = 0;
  for (std::size_t e = fused.size() - 5; e < fused.size(); ++e) {
    tail_f += fused[e];
    tail_r += reference[e];
  }
  EXPECT_NEAR(tail_f, tail_r, 0.05 * tail_r) << "mean loss of the last five epochs";
  EXPECT_LT(fused.back(), 0.5 * fused.front());
}
