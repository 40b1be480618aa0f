#include "attn/seq2seq/trainer.h"

#include <chrono>
#include <cmath>

#include "attn/autograd/node.h"
#include "attn/nn/init.h"
#include "attn/ops/index.h"
#include "attn/ops/reduce.h"
#include "attn/optim/optimizer.h"
#include "attn/seq2seq/loss.h"

namespace attn::seq2seq {

namespace {
// dec_input = cat([<bos>, Y[:, :-1]], 1)
Tensor teacher_forcing_input(const Tensor& Y, std::int64_t bos) {
  Tensor bos_col = full({Y.size(0), 1}, static_cast<double>(bos), DType::i64);
  return cat({bos_col, Y.narrow(1, 0, Y.size(1) - 1)}, 1);
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

TrainResult train_seq2seq(nn::EncoderDecoder& net, const data::NmtData& data, const TrainOptions& o,
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

TrainResult train_seq2seq(nn::EncoderDecoder& net, const data::NmtData& data, const TrainOptions& o,
                          const TrainHooks& hooks, const TrainState* resume) {
  ATTN_CHECK(o.num_epochs > 0, ValueError, "train: num_epochs must be positive, got {}",
             o.num_epochs);
  ATTN_CHECK(o.batch_size > 0, ValueError, "train: batch_size must be positive, got {}",
             o.batch_size);
  ATTN_CHECK(hooks.checkpoint_every >= 0, ValueError,
             "train: checkpoint_every must not be negative, got {}", hooks.checkpoint_every);
  optim::Adam adam(net.parameters(), o.lr);
  const std::int64_t bos = data.tgt_vocab["<bos>"];
  const std::int64_t n = data.src.array.size(0);
  check_training_data(data);
  const std::int64_t num_batches = (n + o.batch_size - 1) / o.batch_size;
  Generator shuffle(o.seed ^ 0x5eed5eedULL);

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
  auto checkpoint = [&] {
    if (!hooks.on_checkpoint) return;
    state.rng_seed = default_generator().seed();
    state.rng_offset = default_generator().offset();
    state.adam_steps = adam.steps();
    state.seconds = elapsed();
    hooks.on_checkpoint(state);
  };
  if (!resume) checkpoint();  // so that a run can be resumed from its first moment on
  const std::int64_t first_step = state.step;
  bool stop = hooks.should_stop && hooks.should_stop();
  while (!stop && state.epoch < o.num_epochs) {
    p.epoch = state.epoch + 1;
    shuffle.set_offset(state.shuffle_offset);
    const auto batches = data::shuffled_batches(n, o.batch_size, shuffle);
    for (bool epoch_done = false; !stop && !epoch_done;) {
      const auto& idx = batches[static_cast<std::size_t>(state.batch)];
      Tensor X = data::take_rows(data.src.array, idx),
             X_len = data::take_rows(data.src.valid_len, idx);
      Tensor Y = data::take_rows(data.tgt.array, idx),
             Y_len = data::take_rows(data.tgt.valid_len, idx);
      adam.zero_grad();
      Tensor Y_hat = net.forward(X, teacher_forcing_input(Y, bos), X_len);
      Tensor l = sum(masked_ce_loss(Y_hat, Y, Y_len));
      l.backward();
      optim::clip_grad_norm(adam.params(), o.grad_clip);
      adam.step();
      const double step_loss = l.item<double>();
      const double step_tokens = sum(Y_len.to(DType::f64)).item<double>();
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
      stop = hooks.should_stop && hooks.should_stop();
      const bool last = state.epoch == o.num_epochs;
      if (stop || last || (hooks.checkpoint_every > 0 && state.step % hooks.checkpoint_every == 0))
        checkpoint();
    }
  }
  if (stop && state.epoch < o.num_epochs) {
    result.stopped = true;
    if (resume && state.step == first_step) checkpoint();  // stopped before any step
  }
  result.tokens += tokens;  // of an epoch cut short
  result.seconds = elapsed();
  result.steps = state.step;
  result.epochs = state.epoch;
  result.final_loss = result.epoch_losses.empty() ? 0.0 : result.epoch_losses.back();
  result.tokens_per_s = result.tokens / std::max(result.seconds, 1e-9);
  net.eval();
  return result;
}

double evaluate_loss(nn::EncoderDecoder& net, const data::TokenArray& src,
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

}  // namespace attn::seq2seq
