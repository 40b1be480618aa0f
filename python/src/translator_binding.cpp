// attn.Translator, attn.evaluate: the bindings and their docstrings.
#include <pybind11/stl.h>

#include "attn/seq2seq/model_dir.h"
#include "bindings.h"
#include "convert.h"
#include "translator.h"

namespace attn::python {

void bind_hypothesis(py::module_& m);  // translator.cpp

namespace {

constexpr const char* kTranslatorDoc = R"doc(
A model directory written by `attn train` (or imported from d2l's PyTorch
code), loaded once: text in, text out, as `attn translate` does it.

Translator(model_dir, precision="f32", quantize="auto", threads=0)
  precision  "f32", or "bf16": the matrix products on bf16 operands with f32
             accumulation (AVX-512 BF16; elsewhere f32, with a warning);
  quantize   "auto" (attn translate's default: int8 for a subword model
             where the CPU runs it, else f32), "int8": the Linear layers'
             weights in int8 per output row, the activations per row at
             each product (AVX-512 VNNI, or AVX2 in 7 bits; elsewhere f32,
             with a warning), or "none" / None: f32;
  threads    threads of each call (`attn --threads N`); 0: attn.get_num_threads().
The model directory is checked as `attn translate` checks it (every file
against its manifest); errors are RuntimeError with the library's message.
One call runs at a time on a Translator (others wait); the GIL is released
while it computes, and Ctrl-C stops it between batches (KeyboardInterrupt).)doc";

constexpr const char* kTranslateDoc = R"doc(
Translates a list of English sentences exactly as `attn translate` does
with the same flags: per sentence, the best translation's text (the line
the CLI prints); with n_best, return_scores or return_attention, a list of
the n_best best Hypothesis objects, best first.

Defaults are the model's (seq2seq::defaults_for): a word model (d2l's)
decodes greedily, at most its num_steps tokens, and cuts a longer source to
num_steps ids as d2l does (with a warning); a subword model (a translator)
uses beam 4 and length penalty 0.6, at most 3 x the source's length, and
refuses a source longer than its max_len positions (ValueError).
  beam_size          beams per sentence; 1 is greedy decoding
  length_penalty     alpha: a hypothesis Y scores log P(Y) / ((5 + |Y|) / 6)^alpha
  n_best             hypotheses returned per sentence, at most beam_size
  max_length         at most N generated tokens, <eos> included (<= max_len)
  max_length_factor  also at most ceil(F x the source's ids with <eos>); 0: off
  return_scores      compute Hypothesis.score and log_prob in greedy decoding too
  return_attention   Hypothesis.attention: every attention map of the
                     translation, as arrays, with its tokens
  max_batch_size     subword models: sentences of similar length per batch
                     (0: 32, or 64 rows in bf16/int8), as --max-batch-size
  inter_threads      subword models: batches decoded side by side (0: one per
                     thread), as --inter-threads; the translations are the same
Sentences are handed to the library 1,024 at a time, as `attn translate`
reads stdin, so the result equals the CLI's for the same lines.)doc";

DecodeArgs decode_args(const py::object& beam_size, const py::object& length_penalty,
                       const py::object& n_best, const py::object& max_length,
                       double max_length_factor, bool return_scores, std::int64_t max_batch_size,
                       std::int64_t inter_threads) {
  DecodeArgs a;
  if (!beam_size.is_none()) a.beam_size = beam_size.cast<std::int64_t>();
  if (!length_penalty.is_none()) a.length_penalty = length_penalty.cast<double>();
  if (!n_best.is_none()) a.n_best = n_best.cast<std::int64_t>();
  if (!max_length.is_none()) a.max_length = max_length.cast<std::int64_t>();
  a.max_length_factor = max_length_factor;
  a.scores = return_scores;
  a.max_batch_size = max_batch_size;
  a.inter_threads = inter_threads;
  return a;
}

py::dict config_dict(const seq2seq::ModelConfig& c) {
  py::dict d;
  d["architecture"] = enum_name(c.architecture);
  d["tokenizer"] = enum_name(c.tokenizer);
  d["src_vocab_size"] = c.transformer.src_vocab_size;
  d["tgt_vocab_size"] = c.transformer.tgt_vocab_size;
  d["num_hiddens"] = c.transformer.num_hiddens;
  d["num_layers"] = c.transformer.num_layers;
  d["num_heads"] = c.transformer.num_heads;
  d["ffn_num_hiddens"] = c.transformer.ffn_num_hiddens;
  d["dropout"] = c.transformer.dropout;
  d["max_len"] = c.transformer.max_len;
  d["positions"] = enum_name(c.transformer.positions);
  d["num_kv_heads"] = c.transformer.kv_heads();
  d["num_steps"] = c.num_steps;
  return d;
}

}  // namespace

void bind_translator(py::module_& m) {
  bind_hypothesis(m);
  py::class_<Translator>(m, "Translator", kTranslatorDoc)
      .def(py::init<const std::string&, const std::string&, const py::object&, int>(),
           py::arg("model_dir"), py::arg("precision") = "f32", py::arg("quantize") = "auto",
           py::arg("threads") = 0)
      .def(
          "translate",
          [](Translator& t, const std::vector<std::string>& sentences, const py::object& beam_size,
             const py::object& length_penalty, const py::object& n_best,
             const py::object& max_length, double max_length_factor, bool return_scores,
             bool return_attention, std::int64_t max_batch_size, std::int64_t inter_threads) {
            return t.translate(
                sentences,
                decode_args(beam_size, length_penalty, n_best, max_length, max_length_factor,
                            return_scores, max_batch_size, inter_threads),
                return_attention);
          },
          py::arg("sentences"), py::kw_only(), py::arg("beam_size") = py::none(),
          py::arg("length_penalty") = py::none(), py::arg("n_best") = py::none(),
          py::arg("max_length") = py::none(), py::arg("max_length_factor") = 0.0,
          py::arg("return_scores") = false, py::arg("return_attention") = false,
          py::arg("max_batch_size") = 0, py::arg("inter_threads") = 0, kTranslateDoc)
      .def("score", &Translator::score, py::arg("sources"), py::arg("targets"), py::kw_only(),
           py::arg("batch_size") = 64,
           "Scores each (source, target) pair by teacher forcing: a PairScore per pair with the "
           "target's tokens (with <eos>), each token's -log p, and their mean (the per-token "
           "loss `attn evaluate` reports, summed over pairs). A pair longer than the model's "
           "max_len positions is a ValueError.")
      .def(
          "evaluate",
          [](Translator& t, const std::string& data, const std::string& split, long num_examples,
             const std::string& pairs, const py::object& beam_size,
             const py::object& length_penalty, const py::object& max_length,
             double max_length_factor, std::int64_t max_batch_size, std::int64_t inter_threads) {
            return t.evaluate(data, split, num_examples, pairs,
                              decode_args(beam_size, length_penalty, py::none(), max_length,
                                          max_length_factor, false, max_batch_size, inter_threads));
          },
          py::kw_only(), py::arg("data") = "", py::arg("split") = "", py::arg("num_examples") = 0,
          py::arg("pairs") = "", py::arg("beam_size") = py::none(),
          py::arg("length_penalty") = py::none(), py::arg("max_length") = py::none(),
          py::arg("max_length_factor") = 0.0, py::arg("max_batch_size") = 0,
          py::arg("inter_threads") = 0,
          "`attn evaluate --json` as a dict: loss (per target token, teacher forcing), "
          "perplexity, sacreBLEU's BLEU (13a) of the translations, exact matches, on `data` "
          "('english<TAB>french' per line, plain or gzip) or the model's held-out `split` "
          "('valid' or 'test'); `pairs` 'A-B' keeps the A-th to B-th pair (1-based).")
      .def_property_readonly("model_dir", &Translator::model_dir)
      .def_property_readonly(
          "config", [](const Translator& t) { return config_dict(t.model().config); },
          "The model's config.json (its sizes), as a dict.")
      .def_property_readonly(
          "precision", [](const Translator& t) { return precision_name(t.precision()); },
          "The precision the products run in (f32 where bf16 is not there).")
      .def_property_readonly("quantize",
                             [](const Translator& t) -> py::object {
                               return t.int8() ? py::object(py::str("int8"))
                                               : py::object(py::none());
                             })
      .def("__repr__", [](const Translator& t) {
        return fmt::format("Translator('{}', architecture={}, tokenizer={}, precision={})",
                           t.model_dir(), enum_name(t.model().config.architecture),
                           enum_name(t.model().config.tokenizer), precision_name(t.precision()));
      });

  m.def(
      "evaluate",
      [](const std::string& model_dir, const std::string& data, const std::string& split,
         long num_examples, const std::string& pairs, const py::object& beam_size,
         const py::object& length_penalty, const py::object& max_length, double max_length_factor,
         const std::string& precision, const py::object& quantize, int threads,
         std::int64_t max_batch_size, std::int64_t inter_threads) {
        Translator t(model_dir, precision, quantize, threads);
        return t.evaluate(data, split, num_examples, pairs,
                          decode_args(beam_size, length_penalty, py::none(), max_length,
                                      max_length_factor, false, max_batch_size, inter_threads));
      },
      py::arg("model_dir"), py::kw_only(), py::arg("data") = "", py::arg("split") = "",
      py::arg("num_examples") = 0, py::arg("pairs") = "", py::arg("beam_size") = py::none(),
      py::arg("length_penalty") = py::none(), py::arg("max_length") = py::none(),
      py::arg("max_length_factor") = 0.0, py::arg("precision") = "f32",
      py::arg("quantize") = "auto", py::arg("threads") = 0, py::arg("max_batch_size") = 0,
      py::arg("inter_threads") = 0,
      "`attn evaluate --model MODEL_DIR ... --json` as a dict (Translator.evaluate).");
}

}  // namespace attn::python
