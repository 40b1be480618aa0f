// attn.Translator: translate() and score() as `attn translate` runs them
// (apps/attn/cmd_translate.cpp, decode_flags.cpp): the model loaded by
// seq2seq::load_model, its decoding defaults from seq2seq::defaults_for,
// the precision and quantization scopes opened for each call, subword models
// through seq2seq::translate_texts with the CLI's batching, d2l's word models
// through seq2seq::translate.
#include "translator.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <utility>

#include "attn/autograd/node.h"
#include "attn/core/threads.h"
#include "attn/data/text.h"
#include "attn/ops/loss.h"
#include "attn/ops/quantize.h"
#include "attn/seq2seq/translate.h"
#include "convert.h"

namespace attn::python {
namespace {

// One hypothesis, as Python sees it.
struct Hypothesis {
  std::string text;
  std::vector<std::string> tokens;
  std::vector<std::int64_t> ids;
  double score = 0, log_prob = 0;
  bool eos = true;
  py::object attention;  // set with the GIL held (None, or the maps)
};

struct PairScore {
  double loss = 0;
  std::vector<std::string> tokens;
  py::object token_losses;
};

// This thread's OpenMP team size for a scope (OpenMP keeps it per thread).
class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(get_num_threads()) {
    if (n > 0) set_num_threads(n);
  }
  ~ThreadCount() { set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

py::dict maps_dict(const seq2seq::AttentionMaps& maps) {
  auto arrays = [](const std::vector<Tensor>& ts) {
    py::list l;
    for (const Tensor& t : ts) l.append(to_numpy(t));
    return l;
  };
  py::dict d;
  d["source_tokens"] = maps.source_tokens;
  d["target_tokens"] = maps.target_tokens;
  d["encoder"] = arrays(maps.encoder);
  d["decoder_self"] = arrays(maps.decoder_self);
  d["decoder_cross"] = arrays(maps.decoder_cross);
  return d;
}

}  // namespace

void warn(const std::string& text) {
  if (PyErr_WarnEx(PyExc_UserWarning, text.c_str(), 2) != 0) throw py::error_already_set();
}

Translator::Translator(const std::string& model_dir, const std::string& precision,
                       const py::object& quantize, int threads)
    : dir_(model_dir), threads_(threads) {
  ATTN_CHECK(threads >= 0 && threads <= 1024, ValueError,
             "Translator: threads must be 0 (attn.get_num_threads()) to 1024, got {}", threads);
  precision_ = parse_precision(precision);
  // quantize: "auto" (attn translate's default: int8 for a subword model
  // where the CPU runs it, seq2seq::default_quantization), "int8", or "none"
  // (None) for f32.
  const std::string q = quantize.is_none() ? "none" : py::str(quantize).cast<std::string>();
  ATTN_CHECK(q == "auto" || q == "none" || q == "int8", ValueError,
             "Translator: quantize must be \"auto\", \"int8\", \"none\" or None, got '{}'", q);
  // What `attn translate --precision bf16 --quantize int8` says and does on
  // a CPU without the instructions: f32, with a warning.
  if (precision_ == Precision::bf16 && !bf16_supported()) {
    warn("attn: precision bf16: this CPU has no AVX-512 BF16; decoding in f32");
    precision_ = Precision::f32;
  }
  m_ = compute([&] { return seq2seq::load_model(model_dir); });
  int8_ =
      q == "auto" ? seq2seq::default_quantization(m_.config) == Quantization::int8 : q == "int8";
  if (int8_ && !int8_supported()) {
    warn("attn: quantize int8: int8 products: " + int8_description() + "; decoding in f32");
    int8_ = false;
  }
}

void Translator::run(const std::function<void()>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  ThreadCount threads(threads_);
  const std::vector<Tensor> params = m_.net->parameters();
  PrecisionScope precision(precision_, params);
  std::unique_ptr<QuantizeScope> quantize;
  if (int8_) quantize = std::make_unique<QuantizeScope>(params);
  fn();
}

seq2seq::DecodeOptions Translator::options(const DecodeArgs& a) const {
  const std::int64_t max_len = m_.config.transformer.max_len;
  seq2seq::DecodeOptions o = seq2seq::defaults_for(m_.config);
  if (a.beam_size) o.beam_size = *a.beam_size;
  if (a.length_penalty) o.length_penalty = *a.length_penalty;
  if (a.n_best) {
    ATTN_CHECK(*a.n_best <= o.beam_size, ValueError,
               "translate: n_best {} is more than the beam size {}: a search keeps at most that "
               "many hypotheses",
               *a.n_best, o.beam_size);
    o.n_best = *a.n_best;
  }
  o.scores = a.scores || a.n_best.has_value();
  if (a.max_length) {
    ATTN_CHECK(*a.max_length >= 1 && *a.max_length <= max_len, ValueError,
               "translate: max_length {} is not in [1, the model's {} positions (max_len)]",
               *a.max_length, max_len);
    o.max_length = *a.max_length;
  }
  o.max_length_factor = a.max_length_factor;
  ATTN_CHECK(a.max_batch_size >= 0 && a.inter_threads >= 0, ValueError,
             "translate: max_batch_size and inter_threads must be 0 (automatic) or more, got {} "
             "and {}",
             a.max_batch_size, a.inter_threads);
  o.validate();
  return o;
}

py::list Translator::translate(const std::vector<std::string>& sentences, const DecodeArgs& args,
                               bool return_attention) {
  for (const std::string& s : sentences) data::check_utf8(s, "translate: input");
  const seq2seq::DecodeOptions opts = options(args);
  const bool detailed = args.n_best.has_value() || args.scores || return_attention;
  const bool word = m_.config.tokenizer == seq2seq::TokenizerKind::word;
  const std::int64_t num_steps = m_.config.num_steps;
  std::vector<std::vector<Hypothesis>> out(sentences.size());
  std::vector<std::vector<seq2seq::AttentionMaps>> maps(sentences.size());
  std::vector<std::size_t> cut;  // word models: sources cut to num_steps (d2l)
  InterruptWatch watch;
  compute_interruptible(watch, [&] {
    run([&] {
      seq2seq::BatchOptions batching;
      batching.batch_size = static_cast<std::size_t>(args.max_batch_size);
      batching.workers = static_cast<int>(args.inter_threads);
      batching.before_batch = [&watch] { watch.check(); };
      for (std::size_t first = 0; first < sentences.size(); first += seq2seq::kTextChunk) {
        watch.check();
        const std::size_t end = std::min(sentences.size(), first + seq2seq::kTextChunk);
        const std::vector<std::string> chunk(sentences.begin() + first, sentences.begin() + end);
        if (!word) {
          const auto ts = seq2seq::translate_texts(*m_.net, *m_.tokenizer, chunk, opts, batching);
          for (std::size_t i = 0; i < ts.size(); ++i)
            for (const seq2seq::TextTranslation& t : ts[i]) {
              out[first + i].push_back({t.text, m_.tokenizer->pieces(t.ids, data::Side::target),
                                        t.ids, t.score, t.log_prob, t.eos, py::object()});
              if (return_attention)
                maps[first + i].push_back(seq2seq::attention_maps(*m_.net, *m_.tokenizer, t));
            }
          continue;
        }
        const auto ts =
            seq2seq::translate(*m_.net, m_.src_vocab, m_.tgt_vocab, chunk, num_steps, opts);
        for (std::size_t i = 0; i < ts.size(); ++i) {
          if (ts[i].front().source_cut) cut.push_back(first + i);
          for (const seq2seq::Translation& t : ts[i]) {
            out[first + i].push_back(
                {t.text, t.tokens, {}, t.score, t.log_prob, t.eos, py::object()});
            if (return_attention)
              maps[first + i].push_back(
                  seq2seq::attention_maps(*m_.net, m_.src_vocab, m_.tgt_vocab, t, num_steps));
          }
        }
      }
    });
  });
  for (std::size_t i : cut)
    warn(
        fmt::format("attn: sentence {} has more than the model's num_steps {} ids with <eos>: "
                    "only the first {} were translated (d2l's cut)",
                    i + 1, num_steps, num_steps));
  py::list result;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!detailed) {
      result.append(out[i].front().text);
      continue;
    }
    py::list hyps;
    for (std::size_t h = 0; h < out[i].size(); ++h) {
      out[i][h].attention = return_attention ? py::object(maps_dict(maps[i][h])) : py::none();
      hyps.append(py::cast(std::move(out[i][h])));
    }
    result.append(hyps);
  }
  return result;
}

py::list Translator::score(const std::vector<std::string>& sources,
                           const std::vector<std::string>& targets, std::int64_t batch_size) {
  ATTN_CHECK(sources.size() == targets.size(), ValueError, "score: {} sources but {} targets",
             sources.size(), targets.size());
  ATTN_CHECK(batch_size >= 1, ValueError, "score: batch_size must be at least 1, got {}",
             batch_size);
  const data::Tokenizer& tok = *m_.tokenizer;
  const data::Vocab &sv = tok.vocab(data::Side::source), &tv = tok.vocab(data::Side::target);
  const std::int64_t max_len = m_.net->max_len();
  std::vector<std::vector<std::int64_t>> src(sources.size()), tgt(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    data::check_utf8(sources[i], "score: source");
    data::check_utf8(targets[i], "score: target");
    src[i] = tok.encode(sources[i], data::Side::source);
    src[i].push_back(sv["<eos>"]);
    tgt[i] = tok.encode(targets[i], data::Side::target);
    tgt[i].push_back(tv["<eos>"]);
    ATTN_CHECK(static_cast<std::int64_t>(std::max(src[i].size(), tgt[i].size())) <= max_len,
               ValueError, "score: pair {} is longer than the model's {} positions (with <eos>)",
               i + 1, max_len);
  }
  std::vector<std::vector<double>> losses(sources.size());
  InterruptWatch watch;
  compute_interruptible(watch, [&] {
    run([&] {
      m_.net->eval();
      autograd::NoGradGuard no_grad;
      const std::int64_t pad = tv["<pad>"], bos = tv["<bos>"];
      const std::size_t step = static_cast<std::size_t>(batch_size);
      for (std::size_t s = 0; s < src.size(); s += step) {
        watch.check();
        const std::size_t n = std::min(step, src.size() - s);
        std::int64_t Ts = 1, Tt = 1;
        for (std::size_t k = s; k < s + n; ++k) {
          Ts = std::max<std::int64_t>(Ts, static_cast<std::int64_t>(src[k].size()));
          Tt = std::max<std::int64_t>(Tt, static_cast<std::int64_t>(tgt[k].size()));
        }
        const std::int64_t B = static_cast<std::int64_t>(n);
        Tensor X = full({B, Ts}, static_cast<double>(sv["<pad>"]), DType::i64);
        Tensor Y = full({B, Tt}, static_cast<double>(pad), DType::i64);
        Tensor dec = full({B, Tt}, static_cast<double>(pad), DType::i64);
        Tensor X_len = Tensor::empty({B}, DType::i64);
        for (std::int64_t b = 0; b < B; ++b) {
          const auto &sr = src[s + b], &tr = tgt[s + b];
          std::copy(sr.begin(), sr.end(), X.data<std::int64_t>() + b * Ts);
          std::copy(tr.begin(), tr.end(), Y.data<std::int64_t>() + b * Tt);
          dec.data<std::int64_t>()[b * Tt] = bos;  // teacher forcing: <bos>, then the target
          std::copy(tr.begin(), tr.end() - 1, dec.data<std::int64_t>() + b * Tt + 1);
          X_len.data<std::int64_t>()[b] = static_cast<std::int64_t>(sr.size());
        }
        Tensor nll = cross_entropy(m_.net->forward(X, dec, X_len), Y).to(DType::f64).contiguous();
        for (std::int64_t b = 0; b < B; ++b) {
          const double* row = nll.data<double>() + b * Tt;
          losses[s + b].assign(row, row + tgt[s + b].size());
        }
      }
    });
  });
  py::list result;
  for (std::size_t i = 0; i < losses.size(); ++i) {
    PairScore p;
    double sum = 0;
    for (double l : losses[i]) sum += l;
    p.loss = sum / static_cast<double>(losses[i].size());
    p.tokens =
        tok.pieces(std::vector<std::int64_t>(tgt[i].begin(), tgt[i].end() - 1), data::Side::target);
    p.tokens.push_back("<eos>");
    py::array_t<double> arr(static_cast<py::ssize_t>(losses[i].size()));
    std::copy(losses[i].begin(), losses[i].end(), arr.mutable_data());
    p.token_losses = std::move(arr);
    result.append(py::cast(std::move(p)));
  }
  return result;
}

void bind_hypothesis(py::module_& m) {
  py::class_<Hypothesis>(m, "Hypothesis", "One translation of a sentence (Translator.translate).")
      .def_readonly("text", &Hypothesis::text, "The translation as `attn translate` prints it.")
      .def_readonly("tokens", &Hypothesis::tokens,
                    "Its target tokens (subword pieces or d2l's words), without <eos>.")
      .def_readonly("ids", &Hypothesis::ids, "Its target ids (subword models), without <eos>.")
      .def_readonly("score", &Hypothesis::score,
                    "log_prob / ((5 + |Y|) / 6)^length_penalty, |Y| counting <eos> (GNMT); "
                    "NaN for greedy decoding without return_scores.")
      .def_readonly("log_prob", &Hypothesis::log_prob,
                    "The sum of its tokens' log-probabilities (<eos> included when it ended so).")
      .def_readonly("eos", &Hypothesis::eos, "False: stopped at the length limit without <eos>.")
      .def_readonly("attention", &Hypothesis::attention,
                    "With return_attention: {'source_tokens', 'target_tokens', 'encoder', "
                    "'decoder_self', 'decoder_cross'}, each kind a list per layer of arrays "
                    "(heads, queries, keys); else None.")
      .def("__repr__", [](const Hypothesis& h) {
        return fmt::format("Hypothesis(text={}, score={})",
                           py::repr(py::str(h.text)).cast<std::string>(), h.score);
      });
  py::class_<PairScore>(m, "PairScore", "A source-target pair scored (Translator.score).")
      .def_readonly("loss", &PairScore::loss,
                    "The target's cross-entropy per token, <eos> included (teacher forcing).")
      .def_readonly("tokens", &PairScore::tokens, "The target's tokens, ending with <eos>.")
      .def_readonly("token_losses", &PairScore::token_losses,
                    "-log p(token | source, the tokens before it), one per token (float64).")
      .def("__repr__",
           [](const PairScore& p) { return fmt::format("PairScore(loss={:.6f})", p.loss); });
}

}  // namespace attn::python
