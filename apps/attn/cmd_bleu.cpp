// attn bleu REF [--input HYP] — score translations made by anything (attn,
// PyTorch, a person) the way sacreBLEU does, so that two systems are compared
// by one scorer.
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "attn/data/text.h"
#include "attn/io/line_reader.h"
#include "attn/seq2seq/bleu.h"
#include "bleu_json.h"
#include "commands.h"

namespace attn::cli {
namespace {

struct BleuArgs {
  std::string ref;
  std::string input = "-";
  bool json = false;
};

std::vector<std::string> read_text_lines(const std::string& path, const std::string& what) {
  io::LineReader lines(
      path == "-" ? io::fd_source(STDIN_FILENO, "stdin") : io::open_file_source(path), what,
      data::kMaxLineBytes);
  std::vector<std::string> out;
  std::string line;
  while (lines.next(line)) {
    data::check_utf8(line, what, lines.line_number());
    out.push_back(std::move(line));
  }
  return out;
}

int run_bleu(const BleuArgs& a) {
  const std::string ref_what = fmt::format("bleu: '{}'", a.ref);
  const std::string hyp_what = a.input == "-" ? "bleu: stdin" : fmt::format("bleu: '{}'", a.input);
  const auto refs = read_text_lines(a.ref, ref_what);
  const auto hyps = read_text_lines(a.input, hyp_what);
  ATTN_CHECK(hyps.size() == refs.size(), ValueError,
             "bleu: {} has {} lines but the references {} have {}; one translation per reference "
             "line is needed",
             a.input == "-" ? "stdin" : "'" + a.input + "'", hyps.size(), "'" + a.ref + "'",
             refs.size());
  ATTN_CHECK(!refs.empty(), ValueError, "bleu: '{}' has no lines to score", a.ref);
  const seq2seq::BleuScore s = seq2seq::corpus_bleu_13a(hyps, refs);
  if (a.json) {
    nlohmann::ordered_json j = {{"sentences", refs.size()}, {"bleu", bleu_json(s, "mixed")}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("{}\n", seq2seq::format_bleu(s));
  }
  flush_stdout();
  return 0;
}

void setup_bleu(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<BleuArgs>();
  CLI::App* sub = parent.add_subcommand(
      "bleu",
      "Score translations against references as sacreBLEU does (13a, cased, corpus BLEU-4)");
  sub->add_option("ref", a->ref, "References, one sentence per line")->required();
  sub->add_option("-i,--input", a->input,
                  "Translations, one per reference line, detokenized ('-': stdin)");
  sub->add_flag("--json", a->json, "Print the score and its parts as one JSON object");
  sub->footer(
      "Output: sacreBLEU's line, 'BLEU = 31.09 62.1/37.5/24.8/16.9 (BP = 0.981 ratio = 0.981 "
      "hyp_len = ... ref_len = ...)'. Both files are tokenized with mteval-v13a's rules, case "
      "kept, n-gram precisions summed over the corpus, 'exp' smoothing; the same scorer as 'attn "
      "evaluate' and the validation during 'attn train'. Lines are paired by position: the two "
      "inputs must have the same number of lines.");
  set_action(sub, ctx, [a](const Context&) { return run_bleu(*a); });
}

const Registration bleu_reg{"", "bleu", 13, setup_bleu};

}  // namespace
}  // namespace attn::cli
