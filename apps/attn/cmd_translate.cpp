// attn translate — English sentences in, French out (greedy or beam search, KV cache).
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/data/text.h"
#include "attn/io/atomic_file.h"
#include "attn/io/line_reader.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/translate.h"
#include "attn/seq2seq/translator.h"
#include "commands.h"
#include "decode_flags.h"
#include "model_args.h"

namespace attn::cli {
namespace {

struct TranslateArgs {
  std::string model;
  std::vector<std::string> sentences;
  DecodeFlags decoding;
  std::string metrics_json;
};

// {"sentences", "seconds", "sentences_per_s"}: the time from the first
// sentence read to the last translation written, without loading the model.
void write_translate_metrics(const std::string& path, std::size_t sentences, double seconds) {
  nlohmann::ordered_json j = {{"sentences", sentences},
                              {"seconds", seconds},
                              {"sentences_per_s", static_cast<double>(sentences) / seconds}};
  io::write_file_atomic(path, j.dump() + "\n");
}

int run_translate(const TranslateArgs& a) {
  a.decoding.check();
  seq2seq::LoadedModel m = load_model_for_cli(a.model);
  const seq2seq::DecodeOptions options = a.decoding.options(m.config);
  const auto precision = a.decoding.precision_scope(m.net->parameters());
  const auto quantize = a.decoding.quantize_scope(m.net->parameters());
  const seq2seq::BatchOptions batching = a.decoding.batching();
  const bool n_best = a.decoding.n_best_given();
  const std::int64_t num_steps = m.config.num_steps;
  // `first` is the index of sentences[0] in the input; `where` names the
  // input of a warning ("line 12", "sentence 2").
  const auto start = std::chrono::steady_clock::now();
  std::size_t count = 0;
  auto finish = [&] {
    if (a.metrics_json.empty()) return;
    write_translate_metrics(
        a.metrics_json, count,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  auto translate = [&](const std::vector<std::string>& sentences, std::size_t first,
                       const char* where) {
    count += sentences.size();
    if (m.config.tokenizer != "word") {  // subword model: cased text in, detokenized text out
      const auto translations =
          seq2seq::translate_texts(*m.net, *m.tokenizer, sentences, options, batching);
      for (std::size_t i = 0; i < translations.size(); ++i) {
        if (!n_best) {
          fmt::print("{}\n", translations[i].front().text);
          continue;
        }
        for (const seq2seq::TextTranslation& t : translations[i])
          fmt::print("{} ||| {} ||| {:.6f}\n", first + i, t.text, t.score);
      }
      flush_stdout();
      return;
    }
    const auto translations =
        seq2seq::translate(*m.net, m.src_vocab, m.tgt_vocab, sentences, num_steps, options);
    for (std::size_t i = 0; i < translations.size(); ++i) {
      const seq2seq::Translation& best = translations[i].front();
      if (best.source_cut)
        fmt::print(stderr,
                   "attn: warning: {} {}: {} tokens and <eos> are more than the model's num_steps "
                   "{}: only the first {} ids were translated (d2l's cut)\n",
                   where, first + i + 1, best.source_tokens.size(), num_steps, num_steps);
      if (!n_best) {
        fmt::print("{}\n", best.text);
        continue;
      }
      for (const seq2seq::Translation& t : translations[i])
        fmt::print("{} ||| {} ||| {:.6f}\n", first + i, t.text, t.score);
    }
    flush_stdout();
  };
  if (!a.sentences.empty()) {
    for (const auto& s : a.sentences) data::check_utf8(s, "translate: input");
    translate(a.sentences, 0, "sentence");
    finish();
    return 0;
  }
  // stdin: read as a stream of bounded lines and translated in chunks as it
  // comes, so that a long stream needs bounded memory and a pipe sees output
  // before its end. A chunk is sorted by length into batches of
  // --max-batch-size (32 or fewer): 1024 lines give batches of alike lengths, and
  // enough of them to keep the --inter-threads busy to the chunk's end.
  constexpr std::size_t kBatch = seq2seq::kTextChunk;
  io::LineReader lines(io::fd_source(STDIN_FILENO, "stdin"), "translate: stdin",
                       data::kMaxLineBytes);
  std::vector<std::string> batch;
  std::string line;
  std::size_t first = 0;
  while (lines.next(line)) {
    data::check_utf8(line, "translate: stdin", lines.line_number());
    batch.push_back(std::move(line));
    if (batch.size() == kBatch) {
      translate(batch, first, "line");
      first += batch.size();
      batch.clear();
    }
  }
  if (!batch.empty()) translate(batch, first, "line");
  finish();
  return 0;
}

void setup_translate(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<TranslateArgs>();
  CLI::App* sub = parent.add_subcommand(
      "translate",
      "Translate English sentences (arguments, or one per line on stdin) with greedy decoding or "
      "beam search");
  sub->add_option("--model", a->model, "Model directory written by 'attn train'")->required();
  sub->add_option("sentences", a->sentences, "Sentences to translate; none: read stdin");
  a->decoding.add_to(sub, /*with_n_best=*/true, /*with_batches=*/true);
  sub->footer(
      "Output: one translation per input line, in order; an empty line gives an empty line. With "
      "--n-best, N lines per sentence, 'I ||| TEXT ||| SCORE', best first (I counts the sentences "
      "from 0; SCORE is the length-normalized log-probability). Word models (d2l's): a sentence "
      "longer than the model's num_steps ids (with <eos>) is cut to them, as d2l does, with a "
      "warning on stderr. Subword models: a sentence longer than the model's max_len positions is "
      "an error.");
  sub->add_option("--metrics-json", a->metrics_json,
                  "Write the number of sentences and the seconds spent translating them (without "
                  "loading the model) as JSON here");
  set_action(sub, ctx, [a](const Context&) { return run_translate(*a); });
}

const Registration translate_reg{"", "translate", 11, setup_translate};

}  // namespace
}  // namespace attn::cli
