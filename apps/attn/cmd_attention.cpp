// attn attention — every layer's and head's attention weights for one sentence.
#include <filesystem>
#include <memory>
#include <string>

#include "attn/data/text.h"
#include "attn/io/atomic_file.h"
#include "attn/seq2seq/report.h"
#include "attn/seq2seq/translate.h"
#include "commands.h"
#include "model_args.h"

namespace attn::cli {
namespace {

struct AttentionArgs {
  std::string model, sentence, out = "out/attention";
};

int run_attention(const AttentionArgs& a) {
  seq2seq::LoadedModel m = load_model_for_cli(a.model);
  data::check_utf8(a.sentence, "attention: input");
  auto tr =
      seq2seq::translate_greedy(*m.net, m.src_vocab, m.tgt_vocab, {a.sentence}, m.config.num_steps);
  auto maps = seq2seq::attention_maps(*m.net, m.src_vocab, m.tgt_vocab, tr[0], m.config.num_steps);
  std::filesystem::path stem(a.out);
  if (stem.has_parent_path()) io::ensure_directory(stem.parent_path());
  seq2seq::save_attention_figures(maps, m.config.transformer.num_heads, a.out);
  fmt::print("{} => {}\n", a.sentence, tr[0].text);
  fmt::print("pictures: {0}-encoder.png, {0}-decoder-self.png, {0}-decoder-cross.png (and .svg)\n",
             a.out);
  return 0;
}

void setup_attention(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<AttentionArgs>();
  CLI::App* sub = parent.add_subcommand(
      "attention", "Translate one sentence and draw every layer's and head's attention weights");
  sub->add_option("--model", a->model, "Model directory written by 'attn train'")->required();
  sub->add_option("sentence", a->sentence, "The English sentence")->required();
  sub->add_option("--out", a->out, "Path stem of the pictures (-encoder.png, ... are appended)")
      ->capture_default_str();
  set_action(sub, ctx, [a](const Context&) { return run_attention(*a); });
}

const Registration attention_reg{"", "attention", 13, setup_attention};

}  // namespace
}  // namespace attn::cli
