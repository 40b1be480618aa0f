#include "decode_flags.h"

#include "commands.h"
#include "precision_flag.h"

namespace attn::cli {

void DecodeFlags::add_to(CLI::App* sub, bool with_n_best, bool with_batches) {
  beam_option_ = sub->add_option("--beam-size", beam_size_,
                                 "Beams per sentence; 1 is greedy decoding (default: 1 for a word "
                                 "model, as d2l; 4 for a subword model)")
                     ->check(in_range<std::int64_t>(1, 1000))
                     ->option_text("K");
  penalty_option_ =
      sub->add_option(
             "--length-penalty", length_penalty_,
             "Length normalization alpha: a hypothesis Y scores log P(Y) / ((5 + |Y|) / 6)^alpha "
             "(GNMT), |Y| counting <eos>; 0: the plain log-probability (default: 0 for a word "
             "model, 0.6 for a subword model)")
          ->check(in_range(0.0, 10.0))
          ->option_text("ALPHA");
  if (with_n_best)
    n_best_option_ =
        sub->add_option(
               "--n-best", n_best_,
               "Print the N best translations of each sentence, best first, one per line "
               "as 'I ||| TEXT ||| SCORE' (I: the sentence's index from 0); N <= --beam-size")
            ->check(in_range<std::int64_t>(1, 1000))
            ->option_text("N");
  sub->add_option("--max-length", max_length_,
                  "At most N generated tokens per sentence, <eos> included (default: a word "
                  "model's num_steps; for a subword model 3 x the source's length unless "
                  "--max-length-factor is given; never more than the model's max_len positions)")
      ->check(in_range<std::int64_t>(1, 1000000))
      ->option_text("N");
  sub->add_option(
         "--max-length-factor", max_length_factor_,
         "Also at most ceil(F x the source's length in ids, <eos> included) tokens; 0: off")
      ->check(in_range(0.0, 1000.0))
      ->option_text("F")
      ->capture_default_str();
  add_precision_flag(sub, precision_, "the weights converted once");
  sub->add_option("--quantize", quantize_,
                  "none (f32), or int8: the Linear layers' weights quantized once to int8 per "
                  "output row and the activations per row at each product, multiplied on "
                  "AVX-512 VNNI, or on AVX2 in 7 bits (a CPU without VNNI); with --precision "
                  "bf16 the other products in bf16; without AVX2, f32 with a warning; auto: int8 "
                  "for a subword "
                  "model where the CPU runs it, else none (a word model: none)")
      ->check(CLI::IsMember({"auto", "none", "int8"}))
      ->capture_default_str();
  if (with_batches) {
    sub->add_option("--max-batch-size", max_batch_size_,
                    "Subword models: at most N sentences of similar length decoded together "
                    "(CTranslate2's max_batch_size; with beam search each has --beam-size rows). "
                    "Larger batches need more memory. A Transformer gives each sentence the same "
                    "bits in any batch; another model's last bits may depend on its batch (its "
                    "padding). 0 (default): 32, or with --precision bf16 or "
                    "--quantize int8 batches of 64 rows, 64 / --beam-size sentences (16 for beam "
                    "4), as those products are as fast on fewer rows and the caches stay small")
        ->check(in_range<std::int64_t>(0, 1 << 20))
        ->option_text("N")
        ->capture_default_str();
    sub->add_option(
           "--inter-threads", inter_threads_,
           "Subword models: batches translated side by side, each on one thread with its "
           "products on that thread alone (CTranslate2's inter_threads); 1: one batch at a "
           "time, its products on all threads; 0 (default): one per thread of --threads. The "
           "translations are the same")
        ->check(in_range<std::int64_t>(0, 1024))
        ->option_text("N")
        ->capture_default_str();
  }
}

std::unique_ptr<PrecisionScope> DecodeFlags::precision_scope(
    const std::vector<Tensor>& parameters) const {
  return std::make_unique<PrecisionScope>(precision_for(precision_, "decoding in f32"), parameters);
}

Quantization DecodeFlags::quantization(const seq2seq::ModelConfig& model) const {
  return quantize_ == "auto" ? seq2seq::default_quantization(model) : parse_quantization(quantize_);
}

std::unique_ptr<QuantizeScope> DecodeFlags::quantize_scope(
    const seq2seq::ModelConfig& model, const std::vector<Tensor>& parameters) const {
  if (quantization(model) == Quantization::none) return nullptr;
  if (!int8_supported()) {
    fmt::print(stderr, "attn: warning: --quantize int8: int8 products: {}; decoding in f32\n",
               attn::int8_description());
    return nullptr;
  }
  return std::make_unique<QuantizeScope>(parameters);
}

seq2seq::BatchOptions DecodeFlags::batching() const {
  seq2seq::BatchOptions b;
  b.batch_size = static_cast<std::size_t>(max_batch_size_);
  // By default one batch per thread, greedy or beam search: faster than one
  // batch at a time on all threads in every precision (docs/design/decoding.md).
  b.workers = static_cast<int>(inter_threads_);  // 0: one per thread
  return b;
}

void DecodeFlags::check() const {
  if (beam_option_ && beam_option_->count() > 0 && n_best_ > beam_size_)
    throw CLI::ValidationError("--n-best",
                               fmt::format("{} is more than --beam-size {}: a search keeps at most "
                                           "--beam-size hypotheses",
                                           n_best_, beam_size_));
}

seq2seq::DecodeOptions DecodeFlags::options(const seq2seq::ModelConfig& model) const {
  check();
  const std::int64_t max_len = model.transformer.max_len;
  if (max_length_ > max_len)
    throw CLI::ValidationError(
        "--max-length",
        fmt::format("{} is more than the model's {} positions (max_len)", max_length_, max_len));
  seq2seq::DecodeOptions o = seq2seq::defaults_for(model);
  if (beam_option_->count() > 0) o.beam_size = beam_size_;
  if (penalty_option_->count() > 0) o.length_penalty = length_penalty_;
  if (n_best_ > o.beam_size)
    throw CLI::ValidationError("--n-best",
                               fmt::format("{} is more than the beam size {}: a search keeps at "
                                           "most that many hypotheses",
                                           n_best_, o.beam_size));
  o.n_best = n_best_;
  o.scores = n_best_given();  // printed only with --n-best
  if (max_length_ > 0) o.max_length = max_length_;
  o.max_length_factor = max_length_factor_;
  return o;
}

}  // namespace attn::cli
