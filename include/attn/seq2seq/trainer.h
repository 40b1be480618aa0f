// attn/seq2seq/trainer.h — d2l's train_seq2seq for the Transformer, with
// checkpoints, exact resume and cooperative stopping.
//
// A run is a sequence of optimizer steps, one per mini-batch; epoch e (from 1)
// visits the batches of shuffled_batches(n, batch_size, shuffle) where the
// shuffle generator has seed `options.seed ^ 0x5eed5eed` and continues from
// epoch to epoch. Dropout draws from default_generator(). Everything that
// decides the next step (parameters, Adam's moments and step count, both
// generators, the position in the epoch, the losses so far) is in TrainState,
// so training resumed from a TrainState takes the very same steps as training
// that never stopped: with the same thread count the losses and parameters are
// bit-identical.
#pragma once

#include <functional>

#include "attn/data/nmt.h"
#include "attn/nn/transformer.h"

namespace attn::seq2seq {

// The hyperparameters of training (the model's are in nn::TransformerConfig).
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
  std::int64_t step = 0;  // optimizer steps since training began (over all resumes)
  double epoch_loss = 0;  // mean loss per token so far in this epoch
  double tokens = 0;  // tokens seen since training began
  double seconds = 0;  // since training began
};

// Where training stands, besides the model's parameters: what a checkpoint
// holds and what training resumes from. Always points at the next batch to
// take: after the last batch of an epoch, `epoch` is incremented and `batch`
// is 0.
struct TrainState {
  std::int64_t step = 0;  // optimizer steps taken
  std::int64_t epoch = 0;  // whole epochs done
  std::int64_t batch = 0;  // batches done of epoch `epoch + 1`
  // The shuffle generator's offset at the start of epoch `epoch + 1`: the
  // epoch's batch order is drawn again from here and its first `batch`
  // batches are skipped.
  std::uint64_t shuffle_offset = 0;
  // default_generator() (dropout) as it was after step `step`.
  std::uint64_t rng_seed = 0, rng_offset = 0;
  // Adam: its step count and moments, one per parameter in
  // net.parameters() order (in a live state these are Adam's own tensors).
  std::int64_t adam_steps = 0;
  std::vector<Tensor> exp_avg, exp_avg_sq;
  // Per step, in order: the summed masked cross-entropy of the batch and the
  // batch's target tokens (so per-token step and epoch losses are recomputed
  // exactly as the run summed them).
  std::vector<double> step_loss, step_tokens;
  double seconds = 0;  // training time so far, over all resumes
};

// How a run is driven from outside.
struct TrainHooks {
  // After every batch (progress bars) and after every epoch.
  std::function<void(const Progress&)> on_batch, on_epoch;
  // Called with the state to save before the first step of a fresh run,
  // every `checkpoint_every` steps (0: never on a schedule), after the last
  // step, and when training stops early. The tensors in the state are live:
  // write them before returning.
  std::int64_t checkpoint_every = 0;
  std::function<void(const TrainState&)> on_checkpoint;
  // Polled before the first step and after every step: true ends training
  // after the step that just finished (a checkpoint is offered first). The
  // library does no signal handling; a CLI sets a flag that this reads.
  std::function<bool()> should_stop;
};

struct TrainResult {
  std::vector<double> epoch_losses;  // per token, as d2l prints (whole epochs only)
  std::vector<double> step_losses;  // per token, one per optimizer step
  double final_loss = 0;  // the last whole epoch's loss (0 if none finished)
  double tokens = 0;
  double seconds = 0;  // over all resumes
  double tokens_per_s = 0;
  std::int64_t steps = 0;  // optimizer steps taken, over all resumes
  std::int64_t epochs = 0;  // whole epochs done
  bool stopped = false;  // should_stop ended the run before the last epoch
};

// ValueError unless `data` has something to learn: at least one pair, and a
// target token that is not <pad>. d2l's valid length counts the ids that are
// not <pad>, so a corpus whose targets are the word "<pad>" has none (and d2l
// would divide by 0). train_seq2seq checks it; callers may check it before
// writing anything.
void check_training_data(const data::NmtData& data);

// Adam, masked cross-entropy, teacher forcing with <bos>, gradient clipping;
// one pass over shuffled batches per epoch. `on_batch` is called after every
// batch (progress bars), `on_epoch` after every epoch.
TrainResult train_seq2seq(nn::EncoderDecoder& net, const data::NmtData& data,
                          const TrainOptions& options,
                          const std::function<void(const Progress&)>& on_batch = {},
                          const std::function<void(const Progress&)>& on_epoch = {});

// The same with checkpoints and stopping. With `resume`, training continues
// from that state: `net` must already hold the parameters saved with it, and
// `options` and `data` must be those of the run that wrote it (ValueError
// for a state that does not fit them: moment shapes, the step count against
// the batches per epoch, an epoch beyond num_epochs). default_generator() is
// set to the state's. A state at the end of training trains nothing and
// returns the recorded losses.
TrainResult train_seq2seq(nn::EncoderDecoder& net, const data::NmtData& data,
                          const TrainOptions& options, const TrainHooks& hooks,
                          const TrainState* resume = nullptr);

// Teacher-forced loss per token on (src, tgt) pairs, without dropout.
double evaluate_loss(nn::EncoderDecoder& net, const data::TokenArray& src,
                     const data::TokenArray& tgt, std::int64_t bos, std::int64_t batch_size = 256);

}  // namespace attn::seq2seq
