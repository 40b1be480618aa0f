// python/src/translator.h — attn.Translator: a model directory loaded once,
// translating lists of strings as `attn translate` does.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "attn/ops/precision.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/translator.h"
#include "compute.h"

namespace attn::python {

namespace py = pybind11;

// The decoding keywords of translate() and evaluate(), the flags of `attn
// translate` (apps/attn/decode_flags.h); None: the model's default
// (seq2seq::defaults_for).
struct DecodeArgs {
  std::optional<std::int64_t> beam_size, n_best, max_length;
  std::optional<double> length_penalty;
  double max_length_factor = 0;
  bool scores = false;  // return_scores
  std::int64_t max_batch_size = 0, inter_threads = 0;
};

class Translator {
 public:
  Translator(const std::string& model_dir, const std::string& precision, const py::object& quantize,
             int threads);

  // Per sentence: the best translation's text; with n_best, return_scores or
  // return_attention, its n-best list of attn.Hypothesis.
  py::list translate(const std::vector<std::string>& sentences, const DecodeArgs& args,
                     bool return_attention);
  // Per pair: the target's cross-entropy per token (teacher forcing).
  py::list score(const std::vector<std::string>& sources, const std::vector<std::string>& targets,
                 std::int64_t batch_size);
  // `attn evaluate --json`'s object, as a dict.
  py::dict evaluate(const std::string& data, const std::string& split, long num_examples,
                    const std::string& pairs, const DecodeArgs& args);

  const seq2seq::LoadedModel& model() const { return m_; }
  std::string model_dir() const { return dir_; }
  Precision precision() const { return precision_; }
  bool int8() const { return int8_; }
  int threads() const { return threads_; }

 private:
  // Runs fn (inside compute(): GIL released, signals blocked) with this
  // translator's lock, thread count and the scopes of its precision and
  // quantization, opened afresh (as one `attn translate` process opens them).
  void run(const std::function<void()>& fn);
  seq2seq::DecodeOptions options(const DecodeArgs& args) const;

  std::string dir_;
  seq2seq::LoadedModel m_;
  Precision precision_ = Precision::f32;
  bool int8_ = false;
  int threads_ = 0;  // 0: attn.get_num_threads() at each call
  std::mutex mu_;  // one call at a time: the modules record state as they run
};

// Python's UserWarning with this text (an error when warnings are errors).
void warn(const std::string& text);

}  // namespace attn::python
