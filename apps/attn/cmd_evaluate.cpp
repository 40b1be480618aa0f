// attn evaluate — loss, perplexity and corpus BLEU of a model on a parallel corpus.
#include <sys/stat.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "attn/data/batching.h"
#include "attn/data/corpus.h"
#include "attn/data/nmt.h"
#include "attn/data/pairs.h"
#include "attn/io/read_file.h"
#include "attn/seq2seq/bleu.h"
#include "attn/seq2seq/hparams.h"
#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translate.h"
#include "attn/seq2seq/translator.h"
#include "bleu_json.h"
#include "commands.h"
#include "decode_flags.h"
#include "model_args.h"

namespace attn::cli {
namespace {

struct EvaluateArgs {
  std::string model, data, split, pairs;  // pairs: "A-B", 1-based, inclusive
  long num_examples = 0;
  bool json = false;
  bool reverse = false;  // --data's second column is the source
  DecodeFlags decoding;
};

// The pairs [first, last) that --pairs A-B selects among n.
std::pair<std::size_t, std::size_t> pair_range(const std::string& spec, std::size_t n) {
  try {
    return data::pair_range(spec, n);
  } catch (const ValueError& e) {
    throw CLI::ValidationError("--pairs", e.what());
  }
}

// Whether this thread's Linear products run in int8 (--quantize).
const char* quantization_in_force() {
  return QuantizeScope::current().cache != nullptr ? "int8" : "none";
}

nlohmann::ordered_json decoding_json(const seq2seq::DecodeOptions& options) {
  return {{"beam_size", options.beam_size},
          {"length_penalty", options.length_penalty},
          {"max_length", options.max_length},
          {"max_length_factor", options.max_length_factor},
          {"quantize", quantization_in_force()}};
}

std::string decoding_text(const seq2seq::DecodeOptions& options) {
  return fmt::format("beam size {}, length penalty {}, max length {}{}, quantize {}",
                     options.beam_size, options.length_penalty,
                     options.max_length > 0 ? fmt::to_string(options.max_length) : "3 x source",
                     options.max_length_factor > 0
                         ? fmt::format(", max length factor {}", options.max_length_factor)
                         : std::string(),
                     quantization_in_force());
}

// A subword model: cased text pairs, per-token loss over the pairs that fit
// the model's positions, BLEU over all of them.
int evaluate_subwords(const EvaluateArgs& a, seq2seq::LoadedModel& m, const std::string& path,
                      const seq2seq::DecodeOptions& options,
                      const seq2seq::BatchOptions& batching) {
  std::vector<data::SentencePair> pairs =
      data::read_pairs(path, static_cast<std::size_t>(a.num_examples));
  if (a.reverse)
    for (data::SentencePair& p : pairs) std::swap(p.source, p.target);
  data::keep_range(pairs, pair_range(a.pairs, pairs.size()));
  const data::Tokenizer& tok = *m.tokenizer;
  const data::Vocab& tv = tok.vocab(data::Side::target);
  std::size_t too_long = 0;
  const data::TokenizedPairs ids =
      data::tokenize_pairs(pairs, tok, m.config.transformer.max_len, &too_long);
  const auto [loss_sum, tokens] =
      seq2seq::evaluate_loss(*m.net, ids, tv["<pad>"], tv["<bos>"], tv["<eos>"]);
  const double loss = tokens > 0 ? loss_sum / tokens : 0.0;
  std::vector<std::string> sources, references, hypotheses;
  for (const auto& p : pairs) {
    sources.push_back(p.source);
    references.push_back(p.target);
  }
  for (auto& n_best : seq2seq::translate_texts(*m.net, tok, sources, options, batching))
    hypotheses.push_back(n_best.front().text);
  const seq2seq::BleuScore bleu = seq2seq::corpus_bleu_13a(hypotheses, references);
  int exact = 0;
  for (std::size_t i = 0; i < pairs.size(); ++i) exact += hypotheses[i] == references[i];
  if (a.json) {
    nlohmann::ordered_json j = {{"data", path},
                                {"pairs", pairs.size()},
                                {"loss", loss},
                                {"perplexity", std::exp(loss)},
                                {"target_tokens", tokens},
                                {"pairs_too_long_for_loss", too_long},
                                {"bleu", bleu_json(bleu, "mixed")},
                                {"exact", exact},
                                {"decoding", decoding_json(options)}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("data: {}\n", path);
  fmt::print("pairs: {}\n", pairs.size());
  fmt::print("loss: {:.4f} per target token with <eos> (teacher forcing, {} tokens)\n", loss,
             tokens);
  fmt::print("perplexity: {:.4f}\n", std::exp(loss));
  fmt::print("sacreBLEU {} (13a tokens, exp smoothing, case-sensitive)\n",
             seq2seq::format_bleu(bleu));
  fmt::print("exact: {} ({:.1f}%)\n", exact, 100.0 * exact / static_cast<double>(pairs.size()));
  fmt::print("decoding: {}\n", decoding_text(options));
  if (too_long > 0)
    fmt::print("left out of the loss: {} pairs longer than the model's {} positions\n", too_long,
               m.config.transformer.max_len);
  return 0;
}

// The bundled corpus is English<TAB>French: a model that records the other
// direction needs --reverse to read it, and one of this direction must not
// have it (scored the wrong way round, BLEU would be near 0 and mean
// nothing).
void check_direction(const EvaluateArgs& a, const seq2seq::ModelConfig& c) {
  if (a.data.empty() || !seq2seq::is_bundled_corpus(a.data) || c.source_lang.empty()) return;
  const bool fr_en = c.source_lang == "fr" && c.target_lang == "en";
  const bool en_fr = c.source_lang == "en" && c.target_lang == "fr";
  if (fr_en && !a.reverse)
    throw ErrorWithHint(
        fmt::format("model '{}' translates fr to en, and '{}' is English<TAB>French", a.model,
                    a.data),
        "--reverse reads its second column as the source");
  if (en_fr && a.reverse)
    throw ErrorWithHint(fmt::format("model '{}' translates en to fr, and --reverse reads '{}' "
                                    "as French<TAB>English",
                                    a.model, a.data),
                        "leave out --reverse");
}

int run_evaluate(const EvaluateArgs& a) {
  a.decoding.check();
  if (a.data.empty() == a.split.empty())
    throw CLI::ValidationError("--data", "give either --data FILE or --split valid|test");
  seq2seq::LoadedModel m = load_model_for_cli(a.model);
  const seq2seq::DecodeOptions options = a.decoding.options(m.config);
  const auto precision = a.decoding.precision_scope(m.net->parameters());
  const auto quantize = a.decoding.quantize_scope(m.config, m.net->parameters());
  std::string path = a.data;
  if (!a.split.empty()) {
    path = (std::filesystem::path(a.model) / "data" / (a.split + ".tsv")).string();
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT)
      throw ValueError(fmt::format(
          "evaluate: '{}' does not exist: --split needs a model trained with a held-out split "
          "(attn train --preset tatoeba); give --data FILE instead",
          path));
    // What is there must be the split attn wrote: a regular file, not a link
    // to one elsewhere, a device or a directory (read as it is, it would be
    // scored, or read without end).
    ATTN_CHECK(S_ISREG(st.st_mode), IOError,
               "evaluate: '{}' is {}, not the regular file 'attn train' writes there", path,
               io::file_kind(st.st_mode));
  }
  check_direction(a, m.config);
  if (m.config.tokenizer != seq2seq::TokenizerKind::word)
    return evaluate_subwords(a, m, path, options, a.decoding.batching());
  data::ParallelCorpus corpus = data::read_parallel_corpus(path, a.num_examples);
  if (a.reverse) std::swap(corpus.source, corpus.target);
  const auto range = pair_range(a.pairs, corpus.source.size());
  data::keep_range(corpus.source, range);
  data::keep_range(corpus.target, range);
  auto src = data::build_array_nmt(corpus.source, m.src_vocab, m.config.num_steps);
  auto tgt = data::build_array_nmt(corpus.target, m.tgt_vocab, m.config.num_steps);
  const double loss = seq2seq::evaluate_loss(*m.net, src, tgt, m.tgt_vocab["<bos>"]);
  std::vector<std::string> sentences;
  for (const auto& s : corpus.source) sentences.push_back(data::join_tokens(s));
  std::vector<data::Tokens> preds;
  std::vector<std::string> hypotheses, references;
  std::size_t cut = 0;
  const std::size_t chunk = 512;
  for (std::size_t s = 0; s < sentences.size(); s += chunk) {
    std::vector<std::string> part(sentences.begin() + s,
                                  sentences.begin() + std::min(sentences.size(), s + chunk));
    for (auto& n_best :
         seq2seq::translate(*m.net, m.src_vocab, m.tgt_vocab, part, m.config.num_steps, options)) {
      cut += n_best.front().source_cut;
      preds.push_back(n_best.front().tokens);
      hypotheses.push_back(n_best.front().text);
    }
  }
  for (const auto& t : corpus.target) references.push_back(data::join_tokens(t));
  const double tokenized = seq2seq::corpus_bleu(preds, corpus.target);
  const seq2seq::BleuScore bleu = seq2seq::corpus_bleu_13a(hypotheses, references);
  int exact = 0;
  for (std::size_t i = 0; i < preds.size(); ++i) exact += preds[i] == corpus.target[i];
  const double exact_percent = 100.0 * exact / static_cast<double>(preds.size());
  if (a.json) {
    nlohmann::ordered_json j = {{"pairs", preds.size()},
                                {"loss", loss},
                                {"perplexity", std::exp(loss)},
                                {"bleu", bleu_json(bleu, "mixed")},
                                {"corpus_bleu_tokens", tokenized},
                                {"exact", exact},
                                {"sources_cut", cut},
                                {"decoding", decoding_json(options)}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("pairs: {}\n", preds.size());
  fmt::print("loss: {:.4f} per token (teacher forcing)\n", loss);
  fmt::print("perplexity: {:.4f}\n", std::exp(loss));
  fmt::print("corpus BLEU-4: {:.4f} (on d2l's tokens, 0 to 1)\n", tokenized);
  fmt::print("sacreBLEU-style {} (13a tokens, exp smoothing, case-sensitive)\n",
             seq2seq::format_bleu(bleu));
  fmt::print("exact: {} ({:.1f}%)\n", exact, exact_percent);
  fmt::print("decoding: {}\n", decoding_text(options));
  if (cut > 0)
    fmt::print("sources cut: {} had more than num_steps {} ids with <eos> (d2l's cut)\n", cut,
               m.config.num_steps);
  return 0;
}

void setup_evaluate(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<EvaluateArgs>();
  CLI::App* sub = add_model_command(
      parent, "evaluate", "Loss, perplexity and corpus BLEU of a model on a parallel corpus",
      a->model);
  sub->add_option("--data", a->data,
                  "Parallel corpus, 'source<TAB>target' per line, plain or gzip");
  sub->add_flag("--reverse", a->reverse,
                "Read --data's second column as the source (a model trained with train "
                "--reverse)");
  sub->add_option("--split", a->split,
                  "Score the model's own held-out split, MODEL/data/SPLIT.tsv (written by 'attn "
                  "train' with validation)")
      ->check(CLI::IsMember({"valid", "test"}))
      ->excludes("--data");
  sub->add_option("--pairs", a->pairs,
                  "Only the A-th to the B-th pair of the data (1-based, inclusive; empty lines "
                  "do not count)")
      ->option_text("A-B");
  sub->add_option("--num-examples", a->num_examples,
                  "Lines to read (a word model: d2l's count, this + 1; a subword model: this many "
                  "pairs); 0: all")
      ->check(in_range(0L, 100000000L));
  sub->add_flag("--json", a->json, "Print the results as one JSON object");
  a->decoding.add_to(sub, /*with_n_best=*/false, /*with_batches=*/true);
  sub->footer(
      "Word models (d2l's): BLEU is reported twice: corpus BLEU-4 on d2l's tokens (0 to 1, as attn "
      "always did), and "
      "as sacreBLEU computes it (0 to 100): the translations as 'attn translate' prints them "
      "against the references as d2l's preprocessing leaves them (lowercased, spaced "
      "punctuation), both tokenized by mteval-v13a's rules, exp smoothing. Subword models: the "
      "per-token loss of each target with its <eos>, and sacreBLEU's BLEU of the detokenized "
      "translations against the references as written (cased).");
  set_action(sub, ctx, [a](const Context&) { return run_evaluate(*a); });
}

const Registration evaluate_reg{"", "evaluate", 12, setup_evaluate};

}  // namespace
}  // namespace attn::cli
