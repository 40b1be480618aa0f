// attn attention — every layer's and head's attention weights for one sentence.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>

#include "attn/data/text.h"
#include "attn/io/atomic_file.h"
#include "attn/seq2seq/report.h"
#include "attn/seq2seq/translate.h"
#include "attn/seq2seq/translator.h"
#include "commands.h"
#include "decode_flags.h"
#include "model_args.h"

namespace attn::cli {
namespace {

struct AttentionArgs {
  std::string model, sentence, out = "out/attention", json;
  DecodeFlags decoding;
};

int run_attention(const AttentionArgs& a) {
  a.decoding.check();
  seq2seq::LoadedModel m = load_model_for_cli(a.model);
  const seq2seq::DecodeOptions options = a.decoding.options(m.config);
  const auto precision = a.decoding.precision_scope(m.net->parameters());
  data::check_utf8(a.sentence, "attention: input");
  // The best hypothesis; its maps come from one teacher-forced pass over its
  // tokens, which gives the weights the search computed for it.
  seq2seq::AttentionMaps maps;
  std::string text;
  if (m.config.tokenizer == "word") {
    auto tr = seq2seq::translate(*m.net, m.src_vocab, m.tgt_vocab, {a.sentence}, m.config.num_steps,
                                 options)[0];
    if (std::all_of(tr[0].source_tokens.begin(), tr[0].source_tokens.end(),
                    [](const std::string& t) { return t.empty(); }))
      throw CLI::ValidationError("sentence",
                                 fmt::format("'{}' has no word to translate", a.sentence));
    maps = seq2seq::attention_maps(*m.net, m.src_vocab, m.tgt_vocab, tr[0], m.config.num_steps);
    text = tr[0].text;
  } else {
    auto tr = seq2seq::translate_texts(*m.net, *m.tokenizer, {a.sentence}, options)[0];
    if (tr[0].source_ids.empty())
      throw CLI::ValidationError("sentence",
                                 fmt::format("'{}' has no word to translate", a.sentence));
    maps = seq2seq::attention_maps(*m.net, *m.tokenizer, tr[0]);
    text = tr[0].text;
  }
  std::filesystem::path stem(a.out);
  if (stem.has_parent_path()) io::ensure_directory(stem.parent_path());
  seq2seq::save_attention_figures(maps, m.config.transformer.num_heads, a.out);
  if (!a.json.empty()) {
    std::filesystem::path json(a.json);
    if (json.has_parent_path()) io::ensure_directory(json.parent_path());
    io::write_file_atomic(json, seq2seq::attention_maps_json(maps, a.sentence, text));
  }
  fmt::print("{} => {}\n", a.sentence, text);
  fmt::print("pictures: {0}-encoder.png, {0}-decoder-self.png, {0}-decoder-cross.png (and .svg)\n",
             a.out);
  if (!a.json.empty())
    fmt::print("weights: {} (every layer, head and kind, with the tokens)\n", a.json);
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
  sub->add_option("--json", a->json,
                  "Also write every weight (each layer, head and kind: encoder self-, decoder\n"
                  "self- and cross-attention, [layer][head][query][key]) with the tokens as JSON");
  a->decoding.add_to(sub, /*with_n_best=*/false);
  set_action(sub, ctx, [a](const Context&) { return run_attention(*a); });
}

const Registration attention_reg{"", "attention", 13, setup_attention};

}  // namespace
}  // namespace attn::cli
