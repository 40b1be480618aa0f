// attn/seq2seq/trainer.h — d2l's train_seq2seq for the Transformer.
#pragma once

#include <functional>

#include "attn/data/nmt.h"
#include "attn/nn/transformer.h"

namespace attn::seq2seq {

struct TrainOptions {
  std::int64_t num_epochs = 200;
  double lr = 0.005;
  std::int64_t batch_size = 64;
  double grad_clip = 1.0;  // d2l's grad_clipping(net, 1)
  std::uint64_t seed = 0;  // shuffling (dropout and init draw from the default generator)
};

struct Progress {
  std::int64_t epoch = 0, num_epochs = 0;  // epoch counts from 1
  std::int64_t batch = 0, num_batches = 0;
  double epoch_loss = 0;  // mean loss per token so far in this epoch
  double tokens = 0;  // tokens seen since training began
  double seconds = 0;  // since training began
};

struct TrainResult {
  std::vector<double> epoch_losses;  // per token, as d2l prints
  double final_loss = 0;
  double tokens = 0;
  double seconds = 0;
  double tokens_per_s = 0;
};

// Xavier-uniform on every Linear weight (d2l's xavier_init_weights).
void xavier_init(nn::Module& net, Generator& gen);

// Adam, masked cross-entropy, teacher forcing with <bos>, gradient clipping;
// one pass over shuffled batches per epoch. `on_batch` is called after every
// batch (progress bars), `on_epoch` after every epoch.
TrainResult train_seq2seq(nn::EncoderDecoder& net, const data::NmtData& data,
                          const TrainOptions& options,
                          const std::function<void(const Progress&)>& on_batch = {},
                          const std::function<void(const Progress&)>& on_epoch = {});

// Teacher-forced loss per token on (src, tgt) pairs, without dropout.
double evaluate_loss(nn::EncoderDecoder& net, const data::TokenArray& src,
                     const data::TokenArray& tgt, std::int64_t bos, std::int64_t batch_size = 256);

}  // namespace attn::seq2seq
