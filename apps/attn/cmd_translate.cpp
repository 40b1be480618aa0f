// attn translate — English sentences in, French out (greedy, KV cache).
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "attn/data/text.h"
#include "attn/io/line_reader.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/translate.h"
#include "commands.h"
#include "model_args.h"

namespace attn::cli {
namespace {

struct TranslateArgs {
  std::string model;
  std::vector<std::string> sentences;
};

int run_translate(const TranslateArgs& a) {
  seq2seq::LoadedModel m = load_model_for_cli(a.model);
  auto translate = [&](const std::vector<std::string>& sentences) {
    for (const auto& t :
         seq2seq::translate_greedy(*m.net, m.src_vocab, m.tgt_vocab, sentences, m.config.num_steps))
      fmt::print("{}\n", t.text);
    flush_stdout();
  };
  if (!a.sentences.empty()) {
    for (const auto& s : a.sentences) data::check_utf8(s, "translate: input");
    translate(a.sentences);
    return 0;
  }
  // stdin: read as a stream of bounded lines and translated in batches as it
  // comes, so that a long stream needs bounded memory and a pipe sees output
  // before its end.
  constexpr std::size_t kBatch = 256;
  io::LineReader lines(io::fd_source(STDIN_FILENO, "stdin"), "translate: stdin",
                       data::kMaxLineBytes);
  std::vector<std::string> batch;
  std::string line;
  while (lines.next(line)) {
    data::check_utf8(line, "translate: stdin", lines.line_number());
    batch.push_back(std::move(line));
    if (batch.size() == kBatch) {
      translate(batch);
      batch.clear();
    }
  }
  if (!batch.empty()) translate(batch);
  return 0;
}

void setup_translate(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<TranslateArgs>();
  CLI::App* sub = parent.add_subcommand(
      "translate",
      "Translate English sentences (arguments, or one per line on stdin) with greedy decoding");
  sub->add_option("--model", a->model, "Model directory written by 'attn train'")->required();
  sub->add_option("sentences", a->sentences, "Sentences to translate; none: read stdin");
  set_action(sub, ctx, [a](const Context&) { return run_translate(*a); });
}

const Registration translate_reg{"", "translate", 11, setup_translate};

}  // namespace
}  // namespace attn::cli
