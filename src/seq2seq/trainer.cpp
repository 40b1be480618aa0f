#include "attn/seq2seq/trainer.h"

#include <chrono>

#include "attn/autograd/node.h"
#include "attn/nn/init.h"
#include "attn/ops/index.h"
#include "attn/ops/reduce.h"
#include "attn/optim/optimizer.h"
#include "attn/seq2seq/loss.h"

namespace attn::seq2seq {

void xavier_init(nn::Module& net, Generator& gen) {
  net.apply([&](nn::Module& m) {
    if (auto* linear = dynamic_cast<nn::Linear*>(&m))
      nn::init::xavier_uniform_(linear->weight, 1.0, gen);
  });
}

namespace {
// dec_input = cat([<bos>, Y[:, :-1]], 1)
Tensor teacher_forcing_input(const Tensor& Y, std::int64_t bos) {
  Tensor bos_col = full({Y.size(0), 1}, static_cast<double>(bos), DType::i64);
  return cat({bos_col, Y.narrow(1, 0, Y.size(1) - 1)}, 1);
}
}  // namespace

TrainResult train_seq2seq(nn::EncoderDecoder& net, const data::NmtData& data, const TrainOptions& o,
                          const std::function<void(const Progress&)>& on_batch,
                          const std::function<void(const Progress&)>& on_epoch) {
  ATTN_CHECK(o.num_epochs > 0, ValueError, "train: num_epochs must be positive, got {}",
             o.num_epochs);
  ATTN_CHECK(o.batch_size > 0, ValueError, "train: batch_size must be positive, got {}",
             o.batch_size);
  optim::Adam adam(net.parameters(), o.lr);
  const std::int64_t bos = data.tgt_vocab["<bos>"];
  const std::int64_t n = data.src.array.size(0);
  Generator shuffle(o.seed ^ 0x5eed5eedULL);
  net.train();
  TrainResult result;
  Progress p;
  p.num_epochs = o.num_epochs;
  p.num_batches = (n + o.batch_size - 1) / o.batch_size;
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (std::int64_t epoch = 1; epoch <= o.num_epochs; ++epoch) {
    double loss_sum = 0, tokens = 0;
    p.epoch = epoch;
    p.batch = 0;
    for (const auto& idx : data::shuffled_batches(n, o.batch_size, shuffle)) {
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
      loss_sum += l.item<double>();
      tokens += sum(Y_len.to(DType::f64)).item<double>();
      ++p.batch;
      p.epoch_loss = loss_sum / tokens;
      p.tokens = result.tokens + tokens;
      p.seconds = elapsed();
      if (on_batch) on_batch(p);
    }
    result.tokens += tokens;
    result.epoch_losses.push_back(loss_sum / tokens);
    ATTN_CHECK(std::isfinite(result.epoch_losses.back()), Error,
               "train: the loss became {} in epoch {}; try a smaller --lr",
               result.epoch_losses.back(), epoch);
    if (on_epoch) on_epoch(p);
  }
  result.seconds = elapsed();
  result.final_loss = result.epoch_losses.back();
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
