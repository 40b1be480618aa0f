// apps/attn/decode_flags.h — the decoding flags of translate, evaluate and
// attention (seq2seq/decode.h): --beam-size, --length-penalty, --n-best,
// --max-length, --max-length-factor, --precision, --quantize, --inter-threads. Ranges are checked
// while parsing (a usage error, exit 2); what depends on the other flags or on the model is checked
// by options().
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "attn/ops/precision.h"
#include "attn/ops/quantize.h"
#include "attn/seq2seq/decode.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/translator.h"

namespace attn::cli {

class DecodeFlags {
 public:
  // Adds the flags to `sub`; --n-best only `with_n_best`; --max-batch-size
  // and --inter-threads only `with_batches` (commands that translate many
  // sentences).
  void add_to(CLI::App* sub, bool with_n_best, bool with_batches = false);
  // Usage errors (CLI::ValidationError) for what the ranges cannot check:
  // --n-best above --beam-size. Call before reading anything.
  void check() const;
  // The options for `model`. A word model (d2l's) decodes greedily by
  // default, at most its num_steps tokens; a subword model (a translator) with
  // beam size 4 and length penalty 0.6 unless the flags say otherwise, at
  // most 3 x the source's length. --max-length may not exceed the model's
  // max_len positions, nor --n-best the beam size (usage errors).
  seq2seq::DecodeOptions options(const seq2seq::ModelConfig& model) const;
  // --n-best was given (even as 1): print the n-best format.
  bool n_best_given() const { return n_best_option_ && n_best_option_->count() > 0; }
  // The precision of the products while decoding (ops/precision.h), with the
  // model's parameters frozen; f32 with a warning on stderr where bf16 was
  // asked for and the CPU lacks AVX-512 BF16.
  std::unique_ptr<PrecisionScope> precision_scope(const std::vector<Tensor>& parameters) const;
  // What --quantize asks for `model`: none or int8 as given; auto (the
  // default) is seq2seq::default_quantization(model): int8 for a subword
  // model where an int8 kernel runs, else none.
  Quantization quantization(const seq2seq::ModelConfig& model) const;
  // The Linear weights among `parameters` in int8 while decoding
  // (ops/quantize.h) where quantization(model) is int8; null for none, and
  // where no int8 kernel runs (f32, with a warning on stderr for an explicit
  // --quantize int8). Open it after precision_scope: with --precision bf16
  // the other products run in bf16.
  std::unique_ptr<QuantizeScope> quantize_scope(const seq2seq::ModelConfig& model,
                                                const std::vector<Tensor>& parameters) const;
  // How translate_texts runs its batches: --max-batch-size sentences each,
  // --inter-threads of them side by side (0: attn's thread count); every
  // thread joins the scopes above (translate_texts).
  seq2seq::BatchOptions batching() const;

 private:
  std::int64_t beam_size_ = 1, n_best_ = 1, max_length_ = 0, inter_threads_ = 0;
  std::int64_t max_batch_size_ = static_cast<std::int64_t>(seq2seq::BatchOptions{}.batch_size);
  double length_penalty_ = 0, max_length_factor_ = 0;
  std::string precision_ = "f32", quantize_ = "auto";
  CLI::Option *n_best_option_ = nullptr, *beam_option_ = nullptr, *penalty_option_ = nullptr;
};

}  // namespace attn::cli
