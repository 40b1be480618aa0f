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

bool better_validation(const Validation& a, const Validation& b, const std::string& metric) {
  if (metric == "loss") return a.loss < b.loss;
  return a.bleu > b.bleu || (a.bleu == b.bleu && a.loss < b.loss);  // ties: the lower loss
}

TrainResult train_seq2seq(nn::Seq2SeqModel& net, const data::NmtData& data, const TrainOptions& o,
                          const TrainHooks& hooks, const TrainState* resume) {
  check_training_data(data);
  FixedLengthBatches batches(data, o.batch_size);
  return train_seq2seq(net, batches, o, hooks, resume);
}

TrainResult train_seq2seq(nn::Seq2SeqModel& net, const BatchSource& source, const TrainOptions& o,
                          const TrainHooks& hooks, const TrainState* resume) {
  ATTN_CHECK(o.num_epochs > 0, ValueError, "train: num_epochs must be positive, got {}",
             o.num_epochs);
  ATTN_CHECK(hooks.checkpoint_every >= 0, ValueError,
             "train: checkpoint_every must not be negative, got {}", hooks.checkpoint_every);
  ATTN_CHECK(o.loss == "d2l" || o.loss == "token", ValueError,
             "train: loss '{}' is not d2l or token", o.loss);
  ATTN_CHECK(o.valid_metric == "bleu" || o.valid_metric == "loss", ValueError,
             "train: valid_metric '{}' is not bleu or loss", o.valid_metric);
  const optim::LrSchedule schedule = optim::parse_lr_schedule(o.lr_schedule);
  optim::Adam adam(net.parameters(), o.lr, o.adam_beta1, o.adam_beta2, o.adam_eps);
  const std::int64_t bos = source.bos();
  const std::int64_t num_batches = source.num_batches();
  Generator shuffle(o.seed ^ 0x5eed5eedULL);
  optim::Communicator* comm = hooks.comm && hooks.comm->size() > 1 ? hooks.comm : nullptr;
  std::vector<float> reduce_buffer;
  // Whether any process says yes (all get the same answer).
  auto any_process = [&](bool yes) {
    if (!comm) return yes;
    double v = yes ? 1.0 : 0.0;
    comm->allreduce_sum(std::span<double>(&v, 1));
    return v > 0;
  };

  // The live state: Adam's own moments, the records so far.
  TrainState state;
  if (resume) {
    check_resume_state(*resume, o, adam.params(), num_batches);
    state = *resume;
    for (std::size_t k = 0; k < adam.params().size(); ++k) {
      copy_(adam.exp_avg()[k], resume->exp_avg[k]);
      copy_(adam.exp_avg_sq()[k], resume->exp_avg_sq[k]);
    }
    adam.set_steps(resume->adam_steps);
    default_generator().manual_seed(resume->rng_seed);
    default_generator().set_offset(resume->rng_offset);
  } else {
    state.shuffle_offset = shuffle.offset();
  }
  ATTN_CHECK(state.num_batches == 0 || state.num_batches == num_batches, ValueError,
             "train: the checkpoint's epochs have {} batches, the data makes {}", state.num_batches,
             num_batches);
  state.num_batches = num_batches;
  if (comm) optim::broadcast_parameters(*comm, adam.params());
  state.exp_avg = adam.exp_avg();
  state.exp_avg_sq = adam.exp_avg_sq();

  TrainResult result;
  // What the run computed before `state`: whole epochs' losses summed step by
  // step in the order it took them, and this epoch's partial sums.
  double loss_sum = 0, tokens = 0;
  for (std::int64_t s = 0; s < state.step; ++s) {
    loss_sum += state.step_loss[s];
    tokens += state.step_tokens[s];
    result.step_losses.push_back(per_token(state.step_loss[s], state.step_tokens[s]));
    if ((s + 1) % num_batches == 0) {
      result.tokens += tokens;
      result.epoch_losses.push_back(loss_sum / tokens);
      loss_sum = tokens = 0;
    }
  }

  net.train();
  Progress p;
  p.num_epochs = o.num_epochs;
  p.num_batches = num_batches;
  const double seconds_before = state.seconds;
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return seconds_before +
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto checkpoint = [&](bool last) {
    if (!hooks.on_checkpoint) return;
    state.rng_seed = default_generator().seed();
    state.rng_offset = default_generator().offset();
    state.adam_steps = adam.steps();
    state.seconds = elapsed();
    hooks.on_checkpoint(state, last);
  };
  // A validation at the current step; true when training should stop early.
  auto validate = [&] {
    if (!hooks.validate) return false;
    net.eval();
    Validation v;
    {
      autograd::NoGradGuard no_grad;
      v = hooks.validate(net);
    }
    net.train();
    v.step = state.step;
    v.seconds = elapsed();
    state.validations.push_back(v);
    const bool best =
        state.best < 0 || better_validation(v, state.validations[state.best], o.valid_metric);
    if (best) {
      state.best = static_cast<std::int64_t>(state.validations.size()) - 1;
      state.stalls = 0;
    } else {
      ++state.stalls;
    }
    if (hooks.on_validation) hooks.on_validation(v, best);
    if (best && hooks.on_best) hooks.on_best(state);
    return o.early_stopping > 0 && state.stalls >= o.early_stopping;
  };
  if (!resume) checkpoint(false);  // so that a run can be resumed from its first moment on
  const std::int64_t first_step = state.step;
  bool stop = any_process(hooks.should_stop && hooks.should_stop());
  // Early stopping or the time limit; a resumed run that had reached either
  // (killed before it could write its outputs) takes no further step.
  bool finished = false;
  if (o.early_stopping > 0 && state.stalls >= o.early_stopping)
    result.early_stopped = finished = true;
  if (o.time_limit > 0 && state.seconds >= 60.0 * o.time_limit)
    result.time_limit_reached = finished = true;
  // bf16 products (ops/precision.h) for the steps and the validations; in
  // each step's forward and backward the parameters do not change, so their
  // bf16 copies are made once a step (frozen until the optimizer's update).
  const Precision precision = parse_precision(o.precision);
  PrecisionScope run_precision(precision);
  const std::vector<Tensor> frozen =
      precision == Precision::bf16 ? adam.params() : std::vector<Tensor>{};
  while (!stop && !finished && state.epoch < o.num_epochs) {
    p.epoch = state.epoch + 1;
    shuffle.set_offset(state.shuffle_offset);
    const auto batches = source.epoch(shuffle);
    for (bool epoch_done = false; !stop && !finished && !epoch_done;) {
      const data::PairBatch whole = source.batch(batches[static_cast<std::size_t>(state.batch)]);
      const double step_tokens = sum(whole.tgt_len.to(DType::f64)).item<double>();
      optim::RowRange rows{0, whole.src.size(0)};
      std::optional<RowShardScope> shard;
      if (comm) {
        rows = optim::shard_rows(whole.src.size(0), comm->rank(), comm->size());
        if (rows.count > 0)
          shard.emplace(default_generator(),
                        Generator::RowShard{static_cast<std::uint64_t>(rows.first),
                                            static_cast<std::uint64_t>(rows.count),
                                            static_cast<std::uint64_t>(whole.src.size(0))});
      }
      adam.zero_grad();
      double step_loss = 0;
      if (rows.count > 0) {
        PrecisionScope step_precision(precision, frozen);
        const data::PairBatch b = comm ? rows_of(whole, rows) : whole;
        Tensor Y_hat = net.forward(b.src, teacher_forcing_input(b.tgt, bos), b.src_len);
        if (o.loss == "d2l") {
          Tensor l = sum(masked_ce_loss(Y_hat, b.tgt, b.tgt_len));
          l.backward();
          step_loss = l.item<double>();
        } else {
          Tensor mask = sequence_mask(b.tgt_len, b.tgt.size(1), Y_hat.dtype());
          Tensor nll;
          Tensor l = cross_entropy(Y_hat, b.tgt, mask, Reduction::sum, o.label_smoothing, &nll);
          if (step_tokens > 0) div(l, step_tokens).backward();
          step_loss = sum(mul(nll, mask)).item<double>();
        }
      }
      shard.reset();
      if (comm) {
        // The sums of the gradients and the losses; the dropout generator's
        // offset from a process that drew (one with no rows did not).
        const bool drew = rows.count > 0;
        std::array<double, 3> extra = {
            step_loss, drew ? static_cast<double>(default_generator().offset()) : 0.0,
            drew ? 1.0 : 0.0};
        const auto t0 = std::chrono::steady_clock::now();
        optim::allreduce_gradients(*comm, adam.params(), extra, reduce_buffer);
        result.allreduce_seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        step_loss = extra[0];
        default_generator().set_offset(static_cast<std::uint64_t>(extra[1] / extra[2]));
      }
      // Clipping fused into the update: the same bits as clip_grad_norm, then step.
      const double norm = optim::grad_norm(adam.params());
      adam.set_lr(optim::scheduled_lr(o.lr, state.step + 1, o.lr_warmup, schedule));
      adam.step_scaled(norm > o.grad_clip ? o.grad_clip / norm : 1.0);
      ATTN_CHECK(std::isfinite(step_loss), Error,
                 "train: the loss became {} in epoch {}, step {}; try a smaller --lr", step_loss,
                 p.epoch, state.step + 1);
      loss_sum += step_loss;
      tokens += step_tokens;
      state.step_loss.push_back(step_loss);
      state.step_tokens.push_back(step_tokens);
      result.step_losses.push_back(per_token(step_loss, step_tokens));
      ++state.step;
      ++state.batch;
      p.batch = state.batch;
      p.step = state.step;
      p.epoch_loss = per_token(loss_sum, tokens);
      p.step_loss = result.step_losses.back();
      p.lr = adam.lr();
      p.tokens = result.tokens + tokens;
      p.seconds = elapsed();
      if (hooks.on_batch) hooks.on_batch(p);
      if (state.batch == num_batches) {
        epoch_done = true;
        result.tokens += tokens;
        result.epoch_losses.push_back(loss_sum / tokens);
        ATTN_CHECK(std::isfinite(result.epoch_losses.back()), Error,
                   "train: the loss became {} in epoch {}; try a smaller --lr",
                   result.epoch_losses.back(), p.epoch);
        loss_sum = tokens = 0;
        ++state.epoch;
        state.batch = 0;
        state.shuffle_offset = shuffle.offset();
        if (hooks.on_epoch) hooks.on_epoch(p);
      }
      const bool last = state.epoch == o.num_epochs;
      if (o.valid_freq > 0 && state.step % o.valid_freq == 0 && validate()) {
        result.early_stopped = finished = true;
      }
      const bool over_time =
          o.time_limit > 0 && (!comm || comm->rank() == 0) && elapsed() >= 60.0 * o.time_limit;
      if (comm) {
        std::array<double, 2> flags = {over_time ? 1.0 : 0.0,
                                       hooks.should_stop && hooks.should_stop() ? 1.0 : 0.0};
        comm->allreduce_sum(flags);
        if (flags[0] > 0) result.time_limit_reached = finished = true;
        stop = flags[1] > 0;
      } else {
        if (over_time) result.time_limit_reached = finished = true;
        stop = hooks.should_stop && hooks.should_stop();
      }
      if (stop || last || finished)
        checkpoint(true);  // the loop ends here
      else if (hooks.checkpoint_every > 0 && state.step % hooks.checkpoint_every == 0)
        checkpoint(false);
    }
  }
  // A validation at the end, unless the last step had one.
  if (!stop && o.valid_freq > 0 && hooks.validate &&
      (state.validations.empty() || state.validations.back().step != state.step)) {
    if (validate()) result.early_stopped = true;
    checkpoint(true);
  }
  if (stop && !finished && state.epoch < o.num_epochs) {
    result.stopped = true;
    if (resume && state.step == first_step) checkpoint(true);  // stopped before any step
  }
  result.tokens += tokens;  // of an epoch cut short
  result.seconds = elapsed();
  result.steps = state.step;
  result.epochs = state.epoch;
  result.final_loss = !result.epoch_losses.empty() ? result.epoch_losses.back()
                      : tokens > 0                 ? loss_sum / tokens
                                                   : 0.0;
  result.tokens_per_s = result.tokens / std::max(result.seconds, 1e-9);
  result.validations = state.validations;
  result.best = state.best;
  net.eval();
  return result;
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
