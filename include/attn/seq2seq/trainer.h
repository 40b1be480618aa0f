// attn/seq2seq/trainer.h — d2l's train_seq2seq for the Transformer, with
// checkpoints, exact resume and cooperative stopping, and the recipe of a
// translator: token batches, label smoothing, a warmup schedule, validation
// and early stopping.
//
// A run is a sequence of optimizer steps, one per batch of a BatchSource;
// epoch e (from 1) visits the batches the source draws for it from the
// shuffle generator (seed `options.seed ^ 0x5eed5eed`, continuing from epoch
// to epoch). Dropout draws from default_generator(). Everything that decides
// the next step (parameters, Adam's moments and step count, both generators,
// the position in the epoch, the losses so far, the validation history) is
// in TrainState, so training resumed from a TrainState takes the very same
// steps as training that never stopped: with the same thread count the losses
// and parameters are bit-identical.
#pragma once

#include <functional>
#include <string>

#include "attn/data/batching.h"
#include "attn/data/nmt.h"
#include "attn/nn/transformer.h"
#include "attn/ops/precision.h"
#include "attn/optim/data_parallel.h"
#include "attn/optim/schedule.h"
#include "attn/seq2seq/options.h"

namespace attn::seq2seq {

// The hyperparameters of training (the model's are in nn::TransformerConfig).
// The defaults are d2l's.
struct TrainOptions {
  std::int64_t num_epochs = 200;
  double lr = 0.005;
  std::int64_t batch_size = 64;
  // Micro-batches a batch is split into (gradients added in order); with N
  // processes each takes accum_steps of the N * accum_steps parts.
  std::int64_t accum_steps = 1;
  double grad_clip = 1.0;  // d2l's grad_clipping(net, 1)
  std::uint64_t seed = 0;  // shuffling (dropout and init draw from the default generator)
  EmbeddingInit embedding_init = EmbeddingInit::normal;  // seq2seq/options.h
  Loss loss = Loss::d2l;
  double label_smoothing = 0.0;  // with loss "token"
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_eps = 1e-8;
  optim::LrSchedule lr_schedule = optim::LrSchedule::constant;
  std::int64_t lr_warmup = 0;  // steps
  std::int64_t valid_freq = 0;  // validate every N steps (0: never)
  std::int64_t early_stopping = 0;  // stop after N validations without improvement (0: never)
  ValidMetric valid_metric = ValidMetric::bleu;
  double time_limit = 0;  // minutes of training over all resumes (0: none)
  // The matrix products of the steps and validations (ops/precision.h; the
  // caller checks bf16_supported() first).
  Precision precision = Precision::f32;
};

// Where the batches of a run come from.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Batches per epoch (the same in every epoch).
  virtual std::int64_t num_batches() const = 0;
  // The batches of one epoch, in order, drawing what is random from `gen`.
  virtual std::vector<std::vector<std::int64_t>> epoch(Generator& gen) const = 0;
  virtual data::PairBatch batch(const std::vector<std::int64_t>& index) const = 0;
  virtual std::int64_t bos() const = 0;
};

// d2l's: the pairs cut or padded to num_steps (NmtData), shuffled and cut
// into batches of batch_size each epoch (data::shuffled_batches).
class FixedLengthBatches : public BatchSource {
 public:
  FixedLengthBatches(const data::NmtData& data, std::int64_t batch_size);
  std::int64_t num_batches() const override;
  std::vector<std::vector<std::int64_t>> epoch(Generator& gen) const override;
  data::PairBatch batch(const std::vector<std::int64_t>& index) const override;
  std::int64_t bos() const override { return bos_; }

 private:
  const data::NmtData& data_;
  std::int64_t batch_size_, bos_;
};

// A translator's: fixed batches of similar lengths (data::token_batches) in
// an order drawn anew each epoch.
class TokenBatches : public BatchSource {
 public:
  TokenBatches(const data::TokenizedPairs& pairs, std::int64_t batch_tokens, std::uint64_t seed,
               std::int64_t pad, std::int64_t bos, std::int64_t eos);
  std::int64_t num_batches() const override;
  std::vector<std::vector<std::int64_t>> epoch(Generator& gen) const override;
  data::PairBatch batch(const std::vector<std::int64_t>& index) const override;
  std::int64_t bos() const override { return bos_; }

 private:
  const data::TokenizedPairs& pairs_;
  std::vector<std::vector<std::int64_t>> batches_;
  std::int64_t pad_, bos_, eos_;
};

struct Progress {
  std::int64_t epoch = 0, num_epochs = 0;  // epoch counts from 1
  std::int64_t batch = 0, num_batches = 0;
  std::int64_t step = 0;  // optimizer steps since training began (over all resumes)
  double epoch_loss = 0;  // mean loss per token so far in this epoch
  double step_loss = 0;  // the last step's loss per token
  double lr = 0;  // the last step's learning rate
  double tokens = 0;  // tokens seen since training began
  double seconds = 0;  // since training began
};

// One validation: the per-token cross-entropy of the validation pairs
// (teacher forcing, no smoothing), its perplexity, and the corpus BLEU of
// their translations.
struct Validation {
  std::int64_t step = 0;
  double loss = 0, perplexity = 0, bleu = 0;
  double seconds = 0;  // of the run before it (training and earlier validations), over all resumes
};

// Where training stands, besides the model's parameters: what a checkpoint
// holds and what training resumes from. Always points at the next batch to
// take: after the last batch of an epoch, `epoch` is incremented and `batch`
// is 0.
struct TrainState {
  std::int64_t step = 0;  // optimizer steps taken
  std::int64_t epoch = 0;  // whole epochs done
  std::int64_t batch = 0;  // batches done of epoch `epoch + 1`
  // Batches per epoch: fixed-size batches follow from the pairs and the batch
  // size; token batches are counted when the run starts (0: not known yet).
  std::int64_t num_batches = 0;
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
  // Every validation so far, the index of the best one (-1: none), and the
  // validations since it (for early stopping).
  std::vector<Validation> validations;
  std::int64_t best = -1, stalls = 0;
};

// How a run is driven from outside.
struct TrainHooks {
  // After every batch (progress bars) and after every epoch.
  std::function<void(const Progress&)> on_batch, on_epoch;
  // Called with the state to save before the first step of a fresh run,
  // every `checkpoint_every` steps (0: never on a schedule), after the last
  // step, and when training stops early. The tensors in the state are live:
  // write them before returning, except with `last`: then no step follows
  // and train_seq2seq changes them no more (a writer may go on reading them
  // after the hook returns, while the caller leaves them alone).
  std::int64_t checkpoint_every = 0;
  std::function<void(const TrainState&, bool last)> on_checkpoint;
  // Polled before the first step and after every step: true ends training
  // after the step that just finished (a checkpoint is offered first). The
  // library does no signal handling; a CLI sets a flag that this reads.
  std::function<bool()> should_stop;
  // Called every options.valid_freq steps (and after the last step when the
  // last step was not one): measures the model (net is in eval mode and no
  // gradients are recorded). on_best is then called when the validation is
  // the best so far by options.valid_metric (e.g. to save the model), and
  // on_validation with every one (logs).
  std::function<Validation(nn::Seq2SeqModel&)> validate;
  std::function<void(const TrainState&)> on_best;
  std::function<void(const Validation&, bool best)> on_validation;
  // Data parallelism: with a communicator of more than one process, every
  // process runs train_seq2seq with the same arguments; each builds the
  // whole batch (so that every row is padded as one process would pad it),
  // takes its rows of it (optim::shard_rows; with accum_steps K, process r
  // of N takes micro-batches r K .. r K + K - 1 of N K), draws its rows' part of the
  // dropout numbers of the whole batch (Generator::RowShard), and the
  // gradients and losses are summed over the processes before every process
  // takes the same step. The parameters start as process 0's. Stopping
  // (should_stop on any process, the time limit on process 0's clock) is
  // decided together, so all stop after the same step. Every hook is called
  // on every process with the same values; which process writes is the
  // caller's choice. `validate` is called on every process (it may split the
  // work, e.g. validate_translator with the communicator).
  optim::Communicator* comm = nullptr;
  // How the gradients are summed over the processes (optim::ReduceOrder):
  // ordered, the bits of one process with --accum-steps N; fast, MPI's order.
  optim::ReduceOrder reduce = optim::ReduceOrder::ordered;
};

struct TrainResult {
  std::vector<double> epoch_losses;  // per token, as d2l prints (whole epochs only)
  std::vector<double> step_losses;  // per token, one per optimizer step
  // The last whole epoch's loss; when none finished, that of the steps taken
  // (0 if none).
  double final_loss = 0;
  double tokens = 0;
  double seconds = 0;  // over all resumes
  double tokens_per_s = 0;
  // Data parallelism: the time this process spent in the gradients'
  // allreduce during this run (waiting for the others included).
  double allreduce_seconds = 0;
  std::int64_t steps = 0;  // optimizer steps taken, over all resumes
  std::int64_t epochs = 0;  // whole epochs done
  bool stopped = false;  // should_stop ended the run before the last epoch
  bool early_stopped = false;  // options.early_stopping validations without improvement
  bool time_limit_reached = false;  // options.time_limit minutes of training
  std::vector<Validation> validations;
  std::int64_t best = -1;  // index of the best validation
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
TrainResult train_seq2seq(nn::Seq2SeqModel& net, const data::NmtData& data,
                          const TrainOptions& options,
                          const std::function<void(const Progress&)>& on_batch = {},
                          const std::function<void(const Progress&)>& on_epoch = {});

// The same over any BatchSource, with checkpoints, stopping and validation.
TrainResult train_seq2seq(nn::Seq2SeqModel& net, const BatchSource& batches,
                          const TrainOptions& options, const TrainHooks& hooks,
                          const TrainState* resume = nullptr);

// The same with checkpoints and stopping. With `resume`, training continues
// from that state: `net` must already hold the parameters saved with it, and
// `options` and `data` must be those of the run that wrote it (ValueError
// for a state that does not fit them: moment shapes, the step count against
// the batches per epoch, an epoch beyond num_epochs). default_generator() is
// set to the state's. A state at the end of training trains nothing and
// returns the recorded losses.
TrainResult train_seq2seq(nn::Seq2SeqModel& net, const data::NmtData& data,
                          const TrainOptions& options, const TrainHooks& hooks,
                          const TrainState* resume = nullptr);

// Teacher-forced loss per token on (src, tgt) pairs, without dropout.
double evaluate_loss(nn::Seq2SeqModel& net, const data::TokenArray& src,
                     const data::TokenArray& tgt, std::int64_t bos, std::int64_t batch_size = 256);

// The same on tokenized pairs, in token batches; returns the summed
// cross-entropy and the target tokens (their ratio is the per-token loss).
std::pair<double, double> evaluate_loss(nn::Seq2SeqModel& net, const data::TokenizedPairs& pairs,
                                        std::int64_t pad, std::int64_t bos, std::int64_t eos,
                                        std::int64_t batch_tokens = 4096);

// Whether `a` is a better validation than `b` by `metric` (bleu: higher,
// equal BLEU broken by the lower loss; loss: lower).
bool better_validation(const Validation& a, const Validation& b, ValidMetric metric);

}  // namespace attn::seq2seq
