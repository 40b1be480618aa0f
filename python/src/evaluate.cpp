// Translator.evaluate and attn.evaluate: `attn evaluate --json`
// (apps/attn/cmd_evaluate.cpp) from Python — the per-token loss (teacher
// forcing), perplexity, sacreBLEU's BLEU of the translations and the exact
// matches, on a parallel corpus or the model's own held-out split.
#include <pybind11/stl.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "attn/data/batching.h"
#include "attn/data/corpus.h"
#include "attn/data/nmt.h"
#include "attn/data/pairs.h"
#include "attn/seq2seq/bleu.h"
#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translate.h"
#include "convert.h"
#include "translator.h"

namespace attn::python {
namespace {

// The pairs [first, last) that "A-B" selects among n.
std::pair<std::size_t, std::size_t> pair_range(const std::string& spec, std::size_t n) {
  try {
    return data::pair_range(spec, n);
  } catch (const ValueError& e) {
    throw ValueError(std::string("evaluate: pairs: ") + e.what());
  }
}

py::dict bleu_dict(const seq2seq::BleuScore& b) {
  py::dict d;
  d["score"] = b.score;
  d["counts"] = b.counts;
  d["totals"] = b.totals;
  d["precisions"] = b.precisions;
  d["bp"] = b.bp;
  d["sys_len"] = b.sys_len;
  d["ref_len"] = b.ref_len;
  d["tokenizer"] = "13a";
  d["smoothing"] = "exp";
  d["case"] = "mixed";
  return d;
}

// As `attn evaluate --json`'s "decoding", with the quantization in force.
py::dict decoding_dict(const seq2seq::DecodeOptions& o, bool int8) {
  py::dict d;
  d["beam_size"] = o.beam_size;
  d["length_penalty"] = o.length_penalty;
  d["max_length"] = o.max_length;
  d["max_length_factor"] = o.max_length_factor;
  d["quantize"] = int8 ? "int8" : "none";
  return d;
}

struct Evaluation {
  std::size_t pairs = 0, too_long = 0, cut = 0;
  double loss = 0, tokens = 0, tokenized_bleu = 0;
  seq2seq::BleuScore bleu;
  int exact = 0;
};

}  // namespace

py::dict Translator::evaluate(const std::string& data, const std::string& split, long num_examples,
                              const std::string& pairs, const DecodeArgs& args) {
  ATTN_CHECK(data.empty() != split.empty(), ValueError,
             "evaluate: give either data=FILE or split='valid'|'test'");
  ATTN_CHECK(split.empty() || split == "valid" || split == "test", ValueError,
             "evaluate: split must be 'valid' or 'test', got '{}'", split);
  ATTN_CHECK(num_examples >= 0, ValueError, "evaluate: num_examples must be >= 0, got {}",
             num_examples);
  std::string path = data;
  if (!split.empty()) {
    path = (std::filesystem::path(dir_) / "data" / (split + ".tsv")).string();
    ATTN_CHECK(std::filesystem::is_regular_file(path), ValueError,
               "evaluate: '{}' does not exist: split needs a model trained with a held-out split "
               "(attn train --preset tatoeba); give data=FILE instead",
               path);
  }
  DecodeArgs quiet = args;
  quiet.n_best.reset();
  const seq2seq::DecodeOptions opts = options(quiet);
  seq2seq::BatchOptions batching;
  batching.batch_size = static_cast<std::size_t>(args.max_batch_size);
  batching.workers = static_cast<int>(args.inter_threads);
  Evaluation e;
  const bool word = m_.config.tokenizer == seq2seq::TokenizerKind::word;
  InterruptWatch watch;
  batching.before_batch = [&watch] { watch.check(); };
  compute_interruptible(watch, [&] {
    run([&] {
      seq2seq::LoadedModel& m = m_;
      if (!word) {
        std::vector<data::SentencePair> ps =
            data::read_pairs(path, static_cast<std::size_t>(num_examples));
        data::keep_range(ps, pair_range(pairs, ps.size()));
        const data::Tokenizer& tok = *m.tokenizer;
        const data::Vocab& tv = tok.vocab(data::Side::target);
        const data::TokenizedPairs ids =
            data::tokenize_pairs(ps, tok, m.config.transformer.max_len, &e.too_long);
        const auto [loss_sum, tokens] =
            seq2seq::evaluate_loss(*m.net, ids, tv["<pad>"], tv["<bos>"], tv["<eos>"]);
        e.loss = tokens > 0 ? loss_sum / tokens : 0.0;
        e.tokens = tokens;
        std::vector<std::string> sources, references, hypotheses;
        for (const auto& p : ps) {
          sources.push_back(p.source);
          references.push_back(p.target);
        }
        for (auto& n_best : seq2seq::translate_texts(*m.net, tok, sources, opts, batching))
          hypotheses.push_back(n_best.front().text);
        e.bleu = seq2seq::corpus_bleu_13a(hypotheses, references);
        for (std::size_t i = 0; i < ps.size(); ++i) e.exact += hypotheses[i] == references[i];
        e.pairs = ps.size();
        return;
      }
      data::ParallelCorpus corpus = data::read_parallel_corpus(path, num_examples);
      const auto range = pair_range(pairs, corpus.source.size());
      data::keep_range(corpus.source, range);
      data::keep_range(corpus.target, range);
      auto src = data::build_array_nmt(corpus.source, m.src_vocab, m.config.num_steps);
      auto tgt = data::build_array_nmt(corpus.target, m.tgt_vocab, m.config.num_steps);
      e.loss = seq2seq::evaluate_loss(*m.net, src, tgt, m.tgt_vocab["<bos>"]);
      std::vector<std::string> sentences, hypotheses, references;
      for (const auto& s : corpus.source) sentences.push_back(data::join_tokens(s));
      std::vector<data::Tokens> preds;
      const std::size_t chunk = 512;  // as `attn evaluate` translates them
      for (std::size_t s = 0; s < sentences.size(); s += chunk) {
        watch.check();
        std::vector<std::string> part(sentences.begin() + s,
                                      sentences.begin() + std::min(sentences.size(), s + chunk));
        for (auto& n_best :
             seq2seq::translate(*m.net, m.src_vocab, m.tgt_vocab, part, m.config.num_steps, opts)) {
          e.cut += n_best.front().source_cut;
          preds.push_back(n_best.front().tokens);
          hypotheses.push_back(n_best.front().text);
        }
      }
      for (const auto& t : corpus.target) references.push_back(data::join_tokens(t));
      e.tokenized_bleu = seq2seq::corpus_bleu(preds, corpus.target);
      e.bleu = seq2seq::corpus_bleu_13a(hypotheses, references);
      for (std::size_t i = 0; i < preds.size(); ++i) e.exact += preds[i] == corpus.target[i];
      e.pairs = preds.size();
    });
  });
  py::dict d;
  if (!word) d["data"] = path;
  d["pairs"] = e.pairs;
  d["loss"] = e.loss;
  d["perplexity"] = std::exp(e.loss);
  if (!word) {
    d["target_tokens"] = e.tokens;
    d["pairs_too_long_for_loss"] = e.too_long;
  }
  d["bleu"] = bleu_dict(e.bleu);
  if (word) d["corpus_bleu_tokens"] = e.tokenized_bleu;
  d["exact"] = e.exact;
  if (word) d["sources_cut"] = e.cut;
  d["decoding"] = decoding_dict(opts, int8_);
  return d;
}

}  // namespace attn::python
