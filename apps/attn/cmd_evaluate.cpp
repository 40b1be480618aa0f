// attn evaluate — loss and corpus BLEU of a model on a parallel corpus.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "attn/data/nmt.h"
#include "attn/seq2seq/bleu.h"
#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translate.h"
#include "commands.h"
#include "model_args.h"

namespace attn::cli {
namespace {

struct EvaluateArgs {
  std::string model, data;
  long num_examples = 0;
};

int run_evaluate(const EvaluateArgs& a) {
  seq2seq::LoadedModel m = load_model_for_cli(a.model);
  data::ParallelCorpus corpus = data::read_parallel_corpus(a.data, a.num_examples);
  auto src = data::build_array_nmt(corpus.source, m.src_vocab, m.config.num_steps);
  auto tgt = data::build_array_nmt(corpus.target, m.tgt_vocab, m.config.num_steps);
  double loss = seq2seq::evaluate_loss(*m.net, src, tgt, m.tgt_vocab["<bos>"]);
  std::vector<std::string> sentences;
  for (const auto& s : corpus.source) {
    std::string joined;
    for (std::size_t i = 0; i < s.size(); ++i) joined += (i ? " " : "") + s[i];
    sentences.push_back(joined);
  }
  std::vector<data::Tokens> preds, refs;
  const std::size_t chunk = 512;
  for (std::size_t s = 0; s < sentences.size(); s += chunk) {
    std::vector<std::string> part(sentences.begin() + s,
                                  sentences.begin() + std::min(sentences.size(), s + chunk));
    for (auto& t :
         seq2seq::translate_greedy(*m.net, m.src_vocab, m.tgt_vocab, part, m.config.num_steps))
      preds.push_back(t.tokens);
  }
  for (const auto& t : corpus.target) refs.push_back(t);
  double b = seq2seq::corpus_bleu(preds, refs);
  int exact = 0;
  for (std::size_t i = 0; i < preds.size(); ++i) exact += preds[i] == refs[i];
  fmt::print(
      "pairs: {}\nloss: {:.4f} per token (teacher forcing)\ncorpus BLEU-4: {:.4f}\nexact: {} "
      "({:.1f}%)\n",
      preds.size(), loss, b, exact, 100.0 * exact / static_cast<double>(preds.size()));
  return 0;
}

void setup_evaluate(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<EvaluateArgs>();
  CLI::App* sub =
      parent.add_subcommand("evaluate", "Corpus BLEU-4 and loss of a model on a parallel corpus");
  sub->add_option("--model", a->model, "Model directory written by 'attn train'")->required();
  sub->add_option("--data", a->data,
                  "Parallel corpus, 'english<TAB>french' per line, plain or gzip")
      ->required();
  sub->add_option("--num-examples", a->num_examples,
                  "Lines to read (d2l's count: this + 1); 0: all")
      ->check(in_range(0L, 100000000L));
  set_action(sub, ctx, [a](const Context&) { return run_evaluate(*a); });
}

const Registration evaluate_reg{"", "evaluate", 12, setup_evaluate};

}  // namespace
}  // namespace attn::cli
