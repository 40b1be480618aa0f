// attn translate — English sentences in, French out (greedy or beam search, KV cache).
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
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
#include "train_output.h"

namespace attn::cli {
namespace {

struct TranslateArgs {
  std::string model;
  std::vector<std::string> sentences;
  DecodeFlags decoding;
  std::string metrics_json;
  bool stream = false;
};

// A descriptor read through `inner`, calling `before_wait` first whenever
// nothing is ready to read (poll), that is when a read would wait for the
// writer: the lines read so far are then translated and written, so that a
// program that writes a line and waits for its translation (a coprocess)
// gets it, while a pipe that is ready with many lines still fills batches.
class AnswerBeforeWaiting : public io::ByteSource {
 public:
  AnswerBeforeWaiting(int fd, std::unique_ptr<io::ByteSource> inner,
                      std::function<void()> before_wait)
      : fd_(fd), inner_(std::move(inner)), before_wait_(std::move(before_wait)) {}
  std::size_t read(char* out, std::size_t n) override {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) == 0) before_wait_();
    return inner_->read(out, n);
  }

 private:
  int fd_;
  std::unique_ptr<io::ByteSource> inner_;
  std::function<void()> before_wait_;
};

bool stdin_is_regular_file() {
  struct stat st {};
  return ::fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode);
}

// {"sentences", "seconds", "sentences_per_s", "quantize"}: the time from
// the first sentence read to the last translation written, without loading
// the model, and whether the Linear products ran in int8.
void write_translate_metrics(const std::string& path, std::size_t sentences, double seconds,
                             bool int8) {
  nlohmann::ordered_json j = {{"sentences", sentences},
                              {"seconds", seconds},
                              {"sentences_per_s", static_cast<double>(sentences) / seconds},
                              {"quantize", int8 ? "int8" : "none"}};
  const std::filesystem::path p(path);
  if (p.has_parent_path()) io::ensure_directory(p.parent_path());
  io::write_file_atomic(p, j.dump() + "\n");
}

int run_translate(const TranslateArgs& a) {
  a.decoding.check();
  if (!a.metrics_json.empty()) check_output_file(a.metrics_json, "--metrics-json");
  seq2seq::LoadedModel m = load_model_for_cli(a.model);
  const seq2seq::DecodeOptions options = a.decoding.options(m.config);
  const auto precision = a.decoding.precision_scope(m.net->parameters());
  const auto quantize = a.decoding.quantize_scope(m.config, m.net->parameters());
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
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
        quantize != nullptr);
  };
  auto translate = [&](const std::vector<std::string>& sentences, std::size_t first,
                       const char* where) {
    count += sentences.size();
    if (m.config.tokenizer !=
        seq2seq::TokenizerKind::word) {  // subword model: cased text in, detokenized text out
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
  // From a pipe or a terminal (or with --stream) a chunk also ends whenever
  // the next read would wait: every line is answered as soon as it is
  // translated (AnswerBeforeWaiting).
  constexpr std::size_t kBatch = seq2seq::kTextChunk;
  std::vector<std::string> batch;
  std::size_t first = 0;
  auto flush_batch = [&] {
    if (batch.empty()) return;
    translate(batch, first, "line");
    first += batch.size();
    batch.clear();
  };
  std::unique_ptr<io::ByteSource> source = io::fd_source(STDIN_FILENO, "stdin");
  if (a.stream || !stdin_is_regular_file())
    source = std::make_unique<AnswerBeforeWaiting>(STDIN_FILENO, std::move(source), flush_batch);
  io::LineReader lines(std::move(source), "translate: stdin", data::kMaxLineBytes);
  std::string line;
  while (lines.next(line)) {
    data::check_utf8(line, "translate: stdin", lines.line_number());
    batch.push_back(std::move(line));
    if (batch.size() == kBatch) flush_batch();
  }
  flush_batch();
  finish();
  return 0;
}

void setup_translate(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<TranslateArgs>();
  CLI::App* sub = add_model_command(
      parent, "translate",
      "Translate English sentences (arguments, or one per line on stdin) with greedy decoding or "
      "beam search",
      a->model);
  sub->add_option("sentences", a->sentences, "Sentences to translate; none: read stdin");
  a->decoding.add_to(sub, /*with_n_best=*/true, /*with_batches=*/true);
  sub->footer(
      "Output: one translation per input line, in order; an empty line gives an empty line. With "
      "--n-best, N lines per sentence, 'I ||| TEXT ||| SCORE', best first (I counts the sentences "
      "from 0; SCORE is the length-normalized log-probability). Word models (d2l's): a sentence "
      "longer than the model's num_steps ids (with <eos>) is cut to them, as d2l does, with a "
      "warning on stderr. Subword models: a sentence longer than the model's max_len positions is "
      "an error.");
  sub->add_flag("--stream", a->stream,
                "Answer each line of stdin as soon as it is translated (for a coprocess); the "
                "default whenever stdin is not a regular file (a pipe, a terminal)");
  sub->add_option("--metrics-json", a->metrics_json,
                  "Write the number of sentences and the seconds spent translating them (without "
                  "loading the model) as JSON here");
  set_action(sub, ctx, [a](const Context&) { return run_translate(*a); });
}

const Registration translate_reg{"", "translate", 11, setup_translate};

}  // namespace
}  // namespace attn::cli
