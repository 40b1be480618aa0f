#include "attn/seq2seq/trainer.h"

#include <array>
#include <chrono>
#include <cmath>
#include <optional>

#include "attn/autograd/node.h"
#include "attn/nn/init.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/index.h"
#include "attn/ops/loss.h"
#include "attn/ops/precision.h"
#include "attn/ops/reduce.h"
#include "attn/optim/optimizer.h"
#include "attn/optim/schedule.h"
#include "attn/seq2seq/loss.h"

namespace attn::seq2seq {

namespace {
// dec_input = cat([<bos>, Y[:, :-1]], 1)
Tensor teacher_forcing_input(const Tensor& Y, std::int64_t bos) {
  Tensor bos_col = full({Y.size(0), 1}, static_cast<double>(bos), DType::i64);
  return cat({bos_col, Y.narrow(1, 0, Y.size(1) - 1)}, 1);
}

// Rows [r.first, r.first + r.count) of a batch.
data::PairBatch rows_of(const data::PairBatch& b, optim::RowRange r) {
  auto rows = [&](const Tensor& t) { return t.narrow(0, r.first, r.count).contiguous(); };
  return {rows(b.src), rows(b.src_len), rows(b.tgt), rows(b.tgt_len)};
}

// The loss per target token; a batch whose targets are all <pad> (valid length
// 0) has no loss and no tokens, and counts as 0 rather than 0/0.
double per_token(double loss, double tokens) { return tokens > 0 ? loss / tokens : 0.0; }
}  // namespace

void check_training_data(const data::NmtData& data) {
  ATTN_CHECK(data.src.array.numel() > 0, ValueError, "train: no training pairs");
  ATTN_CHECK(sum(data.tgt.valid_len.to(DType::f64)).item<double>() > 0, ValueError,
             "train: the target sentences hold no token but <pad>: nothing to learn");
}

TrainResult train_seq2seq(nn::Seq2SeqModel& net, const data::NmtData& data, const TrainOptions& o,
                          const std::function<void(const Progress&)>& on_batch,
                          const std::function<void(const Progress&)>& on_epoch) {
  TrainHooks hooks;
  hooks.on_batch = on_batch;
  hooks.on_epoch = on_epoch;
  return train_seq2seq(net, data, o, hooks);
}

namespace {

// Checks that `s` can continue a run of `o` on `params` with `num_batches`
// batches per epoch.
void check_resume_state(const TrainState& s, const TrainOptions& o,
                        const std::vector<Tensor>& params, std::int64_t num_batches) {
  ATTN_CHECK(s.step >= 0 && s.epoch >= 0 && s.batch >= 0 && s.batch < num_batches, ValueError,
             "train: cannot resume at step {}, epoch {}, batch {} with {} batches per epoch",
             s.step, s.epoch, s.batch, num_batches);
  std::int64_t expected = 0;
  bool overflow = __builtin_mul_overflow(s.epoch, num_batches, &expected) ||
                  __builtin_add_overflow(expected, s.batch, &expected);
  ATTN_CHECK(!overflow && s.step == expected, ValueError,
             "train: cannot resume: step {} is not epoch {} x {} batches + batch {} (the data or "
             "the batch size differ from the run that saved it)",
             s.step, s.epoch, num_batches, s.batch);
  ATTN_CHECK(s.epoch < o.num_epochs || (s.epoch == o.num_epochs && s.batch == 0), ValueError,
             "train: cannot resume at epoch {} of a run of {} epochs", s.epoch + 1, o.num_epochs);
  ATTN_CHECK(s.adam_steps == s.step, ValueError,
             "train: cannot resume: Adam took {} steps but training {}", s.adam_steps, s.step);
  ATTN_CHECK(static_cast<std::int64_t>(s.step_loss.size()) == s.step &&
                 static_cast<std::int64_t>(s.step_tokens.size()) == s.step,
             ValueError, "train: cannot resume: {} and {} step records for {} steps",
             s.step_loss.size(), s.step_tokens.size(), s.step);
  ATTN_CHECK(s.exp_avg.size() == params.size() && s.exp_avg_sq.size() == params.size(), ValueError,
             "train: cannot resume: {} and {} Adam moments for {} parameters", s.exp_avg.size(),
             s.exp_avg_sq.size(), params.size());
  for (std::size_t k = 0; k < params.size(); ++k) {
    for (const Tensor* m : {&s.exp_avg[k], &s.exp_avg_sq[k]}) {
      ATTN_CHECK(m->defined() && m->shape() == params[k].shape() && m->dtype() == params[k].dtype(),
                 ValueError,
                 "train: cannot resume: an Adam moment of parameter {} does not have its shape {} "
                 "and dtype",
                 k, shape_str(params[k].shape()));
    }
  }
}

}  // namespace

FixedLengthBatches::FixedLengthBatches(const data::NmtData& data, std::int64_t batch_size)
    : data_(data), batch_size_(batch_size), bos_(data.tgt_vocab["<bos>"]) {
  ATTN_CHECK(batch_size > 0, ValueError, "train: batch_size must be positive, got {}", batch_size);
}

std::int64_t FixedLengthBatches::num_batches() const {
  return (data_.src.array.size(0) + batch_size_ - 1) / batch_size_;
}

std::vector<std::vector<std::int64_t>> FixedLengthBatches::epoch(Generator& gen) const {
  return data::shuffled_batches(data_.src.array.size(0), batch_size_, gen);
}

data::PairBatch FixedLengthBatches::batch(const std::vector<std::int64_t>& idx) const {
  return {data::take_rows(data_.src.array, idx), data::take_rows(data_.src.valid_len, idx),
          data::take_rows(data_.tgt.array, idx), data::take_rows(data_.tgt.valid_len, idx)};
}

TokenBatches::TokenBatches(const data::TokenizedPairs& pairs, std::int64_t batch_tokens,
                           std::uint64_t seed, std::int64_t pad, std::int64_t bos, std::int64_t eos)
    : pairs_(pairs),
      batches_(data::token_batches(pairs, batch_tokens, seed)),
      pad_(pad),
      bos_(bos),
      eos_(eos) {
  ATTN_CHECK(!batches_.empty(), ValueError, "train: no training pairs");
}

std::int64_t TokenBatches::num_batches() const {
  return static_cast<std::int64_t>(batches_.size());
}

std::vector<std::vector<std::int64_t>> TokenBatches::epoch(Generator& gen) const {
  std::vector<std::vector<std::int64_t>> out;
  for (std::int64_t i : data::epoch_order(num_batches(), gen))
    out.push_back(batches_[static_cast<std::size_t>(i)]);
  return out;
}

data::PairBatch TokenBatches::batch(const std::vector<std::int64_t>& idx) const {
  return data::make_batch(pairs_, idx, pad_, eos_);
}

bool better_validation(const Validation& a, const Validation& b, ValidMetric metric) {
  if (metric == ValidMetric::loss) return a.loss < b.loss;
  return a.bleu > b.bleu || (a.bleu == b.bleu && a.loss < b.loss);  // ties: the lower loss
}

TrainResult train_seq2seq(nn::Seq2SeqModel& net, const data::NmtData& data, const TrainOptions& o,
                          const TrainHooks& hooks, const TrainState* resume) {
  check_training_data(data);
  FixedLengthBatches batches(data, o.batch_size);
  return train_seq2seq(net, batches, o, hooks, resume);
}

namespace {

// The data-parallel part of training (TrainHooks::comm), in one place: which
// rows of a batch this process computes, the sums over the processes, and
// the decisions all take together. With one process each is what a single
// process does on its own.
class DataParallel {
 public:
  DataParallel(optim::Communicator* comm, optim::ReduceOrder order)
      : comm_(comm && comm->size() > 1 ? comm : nullptr), order_(order) {}

  int rank() const { return comm_ ? comm_->rank() : 0; }
  int size() const { return comm_ ? comm_->size() : 1; }

  // The parameters start as process 0's.
  void broadcast(const std::vector<Tensor>& params) {
    if (comm_) optim::broadcast_parameters(*comm_, params);
  }

  // Whether any process says yes (all get the same answer).
  bool any(bool yes) {
    if (!comm_) return yes;
    double v = yes ? 1.0 : 0.0;
    comm_->allreduce_sum(std::span<double>(&v, 1));
    return v > 0;
  }

  // The gradients and `loss` summed over the processes, and the dropout
  // generator's offset from a process that drew (one with no rows did not);
  // the time spent waiting and summing is added to `seconds`.
  void reduce(const std::vector<Tensor>& params, double& loss, bool drew, double& seconds) {
    if (!comm_) return;
    std::array<double, 3> extra = {
        loss, drew ? static_cast<double>(default_generator().offset()) : 0.0, drew ? 1.0 : 0.0};
    const auto t0 = std::chrono::steady_clock::now();
    optim::allreduce_gradients(*comm_, params, extra, buffer_, order_);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    loss = extra[0];
    default_generator().set_offset(static_cast<std::uint64_t>(extra[1] / extra[2]));
  }

  // Whether this process's clock counts for the time limit (the first's).
  bool keeps_time() const { return !comm_ || comm_->rank() == 0; }

  // {over time on the first process, stop asked on any}.
  std::pair<bool, bool> decide(bool over_time, const std::function<bool()>& should_stop) {
    const bool stop = should_stop && should_stop();
    if (!comm_) return {over_time, stop};
    std::array<double, 2> flags = {over_time ? 1.0 : 0.0, stop ? 1.0 : 0.0};
    comm_->allreduce_sum(flags);
    return {flags[0] > 0, flags[1] > 0};
  }

 private:
  optim::Communicator* comm_;
  optim::ReduceOrder order_;
  std::vector<float> buffer_;
};

// One run of train_seq2seq: the state it carries from step to step, and the
// steps it takes, each a method of its own.
class Training {
 public:
  Training(nn::Seq2SeqModel& net, const BatchSource& source, const TrainOptions& o,
           const TrainHooks& hooks, const TrainState* resume)
      : net_(net),
        source_(source),
        o_(o),
        hooks_(hooks),
        resume_(resume),
        schedule_(o.lr_schedule),
        adam_(net.parameters(), o.lr, o.adam_beta1, o.adam_beta2, o.adam_eps),
        bos_(source.bos()),
        num_batches_(source.num_batches()),
        shuffle_(o.seed ^ 0x5eed5eedULL),
        dp_(hooks.comm, hooks.reduce) {}

  TrainResult run();

 private:
  void restore();
  void replay_records();
  double elapsed() const {
    return seconds_before_ +
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void checkpoint(bool last);
  bool validate();
  double forward_backward(const data::PairBatch& b, double step_tokens);
  double micro_batches(const data::PairBatch& whole, double step_tokens, bool& drew);
  void step(const data::PairBatch& whole);
  void end_epoch();
  void after_step();
  void finish(std::int64_t first_step);

  nn::Seq2SeqModel& net_;
  const BatchSource& source_;
  const TrainOptions& o_;
  const TrainHooks& hooks_;
  const TrainState* resume_;
  const optim::LrSchedule schedule_;
  optim::Adam adam_;
  const std::int64_t bos_, num_batches_;
  Generator shuffle_;
  DataParallel dp_;
  Precision precision_ = Precision::f32;
  std::vector<Tensor> frozen_;  // the parameters, for bf16 copies made once a step

  TrainState state_;  // the live state: Adam's own moments, the records so far
  TrainResult result_;
  // This epoch's sums so far (whole epochs are in result_).
  double loss_sum_ = 0, tokens_ = 0;
  Progress p_;
  double seconds_before_ = 0;
  std::chrono::steady_clock::time_point start_;
  bool stop_ = false, finished_ = false, epoch_done_ = false;
};

// The state to start from: the checkpoint's (checked, Adam's moments and the
// dropout generator restored), or a fresh one.
void Training::restore() {
  if (resume_) {
    check_resume_state(*resume_, o_, adam_.params(), num_batches_);
    state_ = *resume_;
    for (std::size_t k = 0; k < adam_.params().size(); ++k) {
      copy_(adam_.exp_avg()[k], resume_->exp_avg[k]);
      copy_(adam_.exp_avg_sq()[k], resume_->exp_avg_sq[k]);
    }
    adam_.set_steps(resume_->adam_steps);
    default_generator().manual_seed(resume_->rng_seed);
    default_generator().set_offset(resume_->rng_offset);
  } else {
    state_.shuffle_offset = shuffle_.offset();
  }
  ATTN_CHECK(state_.num_batches == 0 || state_.num_batches == num_batches_, ValueError,
             "train: the checkpoint's epochs have {} batches, the data makes {}",
             state_.num_batches, num_batches_);
  state_.num_batches = num_batches_;
  dp_.broadcast(adam_.params());
  state_.exp_avg = adam_.exp_avg();
  state_.exp_avg_sq = adam_.exp_avg_sq();
}

// What the run computed before the state: whole epochs' losses summed step
// by step in the order it took them, and this epoch's partial sums.
void Training::replay_records() {
  for (std::int64_t s = 0; s < state_.step; ++s) {
    loss_sum_ += state_.step_loss[s];
    tokens_ += state_.step_tokens[s];
    result_.step_losses.push_back(per_token(state_.step_loss[s], state_.step_tokens[s]));
    if ((s + 1) % num_batches_ == 0) {
      result_.tokens += tokens_;
      result_.epoch_losses.push_back(loss_sum_ / tokens_);
      loss_sum_ = tokens_ = 0;
    }
  }
}

void Training::checkpoint(bool last) {
  if (!hooks_.on_checkpoint) return;
  state_.rng_seed = default_generator().seed();
  state_.rng_offset = default_generator().offset();
  state_.adam_steps = adam_.steps();
  state_.seconds = elapsed();
  hooks_.on_checkpoint(state_, last);
}

// A validation at the current step; true when training should stop early.
bool Training::validate() {
  if (!hooks_.validate) return false;
  net_.eval();
  Validation v;
  {
    autograd::NoGradGuard no_grad;
    v = hooks_.validate(net_);
  }
  net_.train();
  v.step = state_.step;
  v.seconds = elapsed();
  state_.validations.push_back(v);
  const bool best =
      state_.best < 0 || better_validation(v, state_.validations[state_.best], o_.valid_metric);
  if (best) {
    state_.best = static_cast<std::int64_t>(state_.validations.size()) - 1;
    state_.stalls = 0;
  } else {
    ++state_.stalls;
  }
  if (hooks_.on_validation) hooks_.on_validation(v, best);
  if (best && hooks_.on_best) hooks_.on_best(state_);
  return o_.early_stopping > 0 && state_.stalls >= o_.early_stopping;
}

// The loss of this process's rows `b` (summed over their tokens), its
// gradients accumulated.
double Training::forward_backward(const data::PairBatch& b, double step_tokens) {
  PrecisionScope step_precision(precision_, frozen_);
  Tensor Y_hat = net_.forward(b.src, teacher_forcing_input(b.tgt, bos_), b.src_len);
  if (o_.loss == Loss::d2l) {
    Tensor l = sum(masked_ce_loss(Y_hat, b.tgt, b.tgt_len));
    l.backward();
    return l.item<double>();
  }
  Tensor mask = sequence_mask(b.tgt_len, b.tgt.size(1), Y_hat.dtype());
  Tensor nll;
  Tensor l = cross_entropy(Y_hat, b.tgt, mask, Reduction::sum, o_.label_smoothing, &nll);
  if (step_tokens > 0) div(l, step_tokens).backward();
  return sum(mul(nll, mask)).item<double>();
}

// This process's micro-batches of `whole`, in order: the batch is cut into
// processes x accum_steps parts by rows (optim::shard_rows), process r taking
// parts r K .. r K + K - 1. Each part's gradients are added to the ones
// before, in order, and its loss likewise; each draws its rows' part of the
// dropout numbers of the whole batch, from the step's first offset
// (Generator::RowShard). So one process with K parts computes what K
// processes with one part each do, and the ordered sum over the processes
// (optim::ReduceOrder::ordered) adds them in the same order. `drew`: some
// part had rows.
double Training::micro_batches(const data::PairBatch& whole, double step_tokens, bool& drew) {
  const std::int64_t n = whole.src.size(0), k = o_.accum_steps, parts = dp_.size() * k;
  if (parts == 1) {
    drew = n > 0;
    return n > 0 ? forward_backward(whole, step_tokens) : 0.0;
  }
  Generator& gen = default_generator();
  const std::uint64_t start = gen.offset();
  std::uint64_t end = start;
  double loss = 0;
  drew = false;
  for (std::int64_t j = dp_.rank() * k; j < (dp_.rank() + 1) * k; ++j) {
    const optim::RowRange rows = optim::shard_rows(n, static_cast<int>(j), static_cast<int>(parts));
    if (rows.count == 0) continue;
    gen.set_offset(start);
    RowShardScope shard(gen, Generator::RowShard{static_cast<std::uint64_t>(rows.first),
                                                 static_cast<std::uint64_t>(rows.count),
                                                 static_cast<std::uint64_t>(n)});
    loss += forward_backward(rows.count == n ? whole : rows_of(whole, rows), step_tokens);
    end = gen.offset();
    drew = true;
  }
  gen.set_offset(end);
  return loss;
}

// One optimizer step on the batch `whole`, and its records.
void Training::step(const data::PairBatch& whole) {
  const double step_tokens = sum(whole.tgt_len.to(DType::f64)).item<double>();
  adam_.zero_grad();
  bool drew = false;
  double step_loss = micro_batches(whole, step_tokens, drew);
  dp_.reduce(adam_.params(), step_loss, drew, result_.allreduce_seconds);
  // Clipping fused into the update: the same bits as clip_grad_norm, then step.
  const double norm = optim::grad_norm(adam_.params());
  adam_.set_lr(optim::scheduled_lr(o_.lr, state_.step + 1, o_.lr_warmup, schedule_));
  adam_.step_scaled(norm > o_.grad_clip ? o_.grad_clip / norm : 1.0);
  ATTN_CHECK(std::isfinite(step_loss), Error,
             "train: the loss became {} in epoch {}, step {}; try a smaller --lr", step_loss,
             p_.epoch, state_.step + 1);
  loss_sum_ += step_loss;
  tokens_ += step_tokens;
  state_.step_loss.push_back(step_loss);
  state_.step_tokens.push_back(step_tokens);
  result_.step_losses.push_back(per_token(step_loss, step_tokens));
  ++state_.step;
  ++state_.batch;
  p_.batch = state_.batch;
  p_.step = state_.step;
  p_.epoch_loss = per_token(loss_sum_, tokens_);
  p_.step_loss = result_.step_losses.back();
  p_.lr = adam_.lr();
  p_.tokens = result_.tokens + tokens_;
  p_.seconds = elapsed();
  if (hooks_.on_batch) hooks_.on_batch(p_);
}

void Training::end_epoch() {
  epoch_done_ = true;
  result_.tokens += tokens_;
  result_.epoch_losses.push_back(loss_sum_ / tokens_);
  ATTN_CHECK(std::isfinite(result_.epoch_losses.back()), Error,
             "train: the loss became {} in epoch {}; try a smaller --lr",
             result_.epoch_losses.back(), p_.epoch);
  loss_sum_ = tokens_ = 0;
  ++state_.epoch;
  state_.batch = 0;
  state_.shuffle_offset = shuffle_.offset();
  if (hooks_.on_epoch) hooks_.on_epoch(p_);
}

// After a step: the validation due, the time limit, a stop asked for, and
// the checkpoint they call for.
void Training::after_step() {
  const bool last = state_.epoch == o_.num_epochs;
  if (o_.valid_freq > 0 && state_.step % o_.valid_freq == 0 && validate())
    result_.early_stopped = finished_ = true;
  const bool over_time = o_.time_limit > 0 && dp_.keeps_time() && elapsed() >= 60.0 * o_.time_limit;
  const auto [time_up, stop] = dp_.decide(over_time, hooks_.should_stop);
  if (time_up) result_.time_limit_reached = finished_ = true;
  stop_ = stop;
  if (stop_ || last || finished_)
    checkpoint(true);  // the loop ends here
  else if (hooks_.checkpoint_every > 0 && state_.step % hooks_.checkpoint_every == 0)
    checkpoint(false);
}

// The end: a last validation unless the last step had one, a checkpoint
// for a resumed run stopped before its first step, and the result.
void Training::finish(std::int64_t first_step) {
  if (!stop_ && o_.valid_freq > 0 && hooks_.validate &&
      (state_.validations.empty() || state_.validations.back().step != state_.step)) {
    if (validate()) result_.early_stopped = true;
    checkpoint(true);
  }
  if (stop_ && !finished_ && state_.epoch < o_.num_epochs) {
    result_.stopped = true;
    if (resume_ && state_.step == first_step) checkpoint(true);  // stopped before any step
  }
  result_.tokens += tokens_;  // of an epoch cut short
  result_.seconds = elapsed();
  result_.steps = state_.step;
  result_.epochs = state_.epoch;
  result_.final_loss = !result_.epoch_losses.empty() ? result_.epoch_losses.back()
                       : tokens_ > 0                 ? loss_sum_ / tokens_
                                                     : 0.0;
  result_.tokens_per_s = result_.tokens / std::max(result_.seconds, 1e-9);
  result_.validations = state_.validations;
  result_.best = state_.best;
}

TrainResult Training::run() {
  restore();
  replay_records();
  net_.train();
  p_.num_epochs = o_.num_epochs;
  p_.num_batches = num_batches_;
  seconds_before_ = state_.seconds;
  start_ = std::chrono::steady_clock::now();
  if (!resume_) checkpoint(false);  // so that a run can be resumed from its first moment on
  const std::int64_t first_step = state_.step;
  stop_ = dp_.any(hooks_.should_stop && hooks_.should_stop());
  // Early stopping or the time limit; a resumed run that had reached either
  // (killed before it could write its outputs) takes no further step.
  if (o_.early_stopping > 0 && state_.stalls >= o_.early_stopping)
    result_.early_stopped = finished_ = true;
  if (o_.time_limit > 0 && state_.seconds >= 60.0 * o_.time_limit)
    result_.time_limit_reached = finished_ = true;
  // bf16 products (ops/precision.h) for the steps and the validations; in
  // each step's forward and backward the parameters do not change, so their
  // bf16 copies are made once a step (frozen until the optimizer's update).
  precision_ = o_.precision;
  PrecisionScope run_precision(precision_);
  if (precision_ == Precision::bf16) frozen_ = adam_.params();
  while (!stop_ && !finished_ && state_.epoch < o_.num_epochs) {
    p_.epoch = state_.epoch + 1;
    shuffle_.set_offset(state_.shuffle_offset);
    const auto batches = source_.epoch(shuffle_);
    for (epoch_done_ = false; !stop_ && !finished_ && !epoch_done_;) {
      step(source_.batch(batches[static_cast<std::size_t>(state_.batch)]));
      if (state_.batch == num_batches_) end_epoch();
      after_step();
    }
  }
  finish(first_step);
  net_.eval();
  return result_;
}

}  // namespace

TrainResult train_seq2seq(nn::Seq2SeqModel& net, const BatchSource& source, const TrainOptions& o,
                          const TrainHooks& hooks, const TrainState* resume) {
  ATTN_CHECK(o.num_epochs > 0, ValueError, "train: num_epochs must be positive, got {}",
             o.num_epochs);
  ATTN_CHECK(hooks.checkpoint_every >= 0, ValueError,
             "train: checkpoint_every must not be negative, got {}", hooks.checkpoint_every);
  return Training(net, source, o, hooks, resume).run();
}

double evaluate_loss(nn::Seq2SeqModel& net, const data::TokenArray& src,
                     const data::TokenArray& tgt, std::int64_t bos, std::int64_t batch_size) {
  net.eval();
  autograd::NoGradGuard no_grad;
  const std::int64_t n = src.array.size(0);
  double loss_sum = 0, tokens = 0;
  for (std::int64_t s = 0; s < n; s += batch_size) {
    std::int64_t len = std::min(batch_size, n - s);
    Tensor X = src.array.narrow(0, s, len).contiguous(),
           X_len = src.valid_len.narrow(0, s, len).contiguous();
    Tensor Y = tgt.array.narrow(0, s, len).contiguous(),
           Y_len = tgt.valid_len.narrow(0, s, len).contiguous();
    Tensor Y_hat = net.forward(X, teacher_forcing_input(Y, bos), X_len);
    loss_sum += sum(masked_ce_loss(Y_hat, Y, Y_len)).item<double>();
    tokens += sum(Y_len.to(DType::f64)).item<double>();
  }
  ATTN_CHECK(tokens > 0, ValueError, "evaluate: no target tokens to score");
  return loss_sum / tokens;
}

std::pair<double, double> evaluate_loss(nn::Seq2SeqModel& net, const data::TokenizedPairs& pairs,
                                        std::int64_t pad, std::int64_t bos, std::int64_t eos,
                                        std::int64_t batch_tokens) {
  net.eval();
  autograd::NoGradGuard no_grad;
  double loss_sum = 0, tokens = 0;
  for (const auto& idx : data::token_batches(pairs, batch_tokens, 0)) {
    data::PairBatch b = data::make_batch(pairs, idx, pad, eos);
    Tensor Y_hat = net.forward(b.src, teacher_forcing_input(b.tgt, bos), b.src_len);
    Tensor mask = sequence_mask(b.tgt_len, b.tgt.size(1), Y_hat.dtype());
    loss_sum += cross_entropy(Y_hat, b.tgt, mask, Reduction::sum).item<double>();
    tokens += sum(b.tgt_len.to(DType::f64)).item<double>();
  }
  return {loss_sum, tokens};
}

}  // namespace attn::seq2seq
