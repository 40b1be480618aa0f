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
#include "attn/viz/attention_viewer.h"
#include "commands.h"
#include "decode_flags.h"
#include "model_args.h"
#include "train_output.h"

namespace attn::cli {
namespace {

struct AttentionArgs {
  std::string model, sentence, out = "out/attention", json, html;
  // The viewer's first view: 1-based layer and head ("all": their mean),
  // and the kind by the pictures' suffixes.
  std::int64_t layer = 1;
  std::string head = "all", kind = "decoder-cross";
  DecodeFlags decoding;
  CLI::Option* out_option = nullptr;
  // The pictures are drawn when --out is given, or when no other output is.
  bool pictures() const { return out_option->count() > 0 || (json.empty() && html.empty()); }
};

// The viewer's first view, checked against the maps: a usage error (exit 2)
// names what the model has.
viz::AttentionViewerView viewer_view(const AttentionArgs& a, const seq2seq::AttentionMaps& maps) {
  viz::AttentionViewerView view;
  const std::vector<Tensor>* layers = &maps.decoder_cross;
  view.kind = "decoder_cross";
  if (a.kind == "encoder") {
    layers = &maps.encoder;
    view.kind = "encoder";
  } else if (a.kind == "decoder-self") {
    layers = &maps.decoder_self;
    view.kind = "decoder_self";
  }
  if (layers->empty())
    throw CLI::ValidationError("--kind", fmt::format("the model has no {} attention", a.kind));
  const auto num_layers = static_cast<std::int64_t>(layers->size());
  if (a.layer > num_layers)
    throw CLI::ValidationError(
        "--layer", fmt::format("{} is more than the model's {} layers", a.layer, num_layers));
  view.layer = a.layer;
  if (a.head != "all") {
    const std::int64_t num_heads = (*layers)[0].size(0);
    const std::int64_t head = std::stoll(a.head);  // checked by the option's validator
    if (head > num_heads)
      throw CLI::ValidationError(
          "--head", fmt::format("{} is more than the model's {} heads", head, num_heads));
    view.head = head;
  }
  return view;
}

void ensure_parent(const std::string& path) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) io::ensure_directory(p.parent_path());
}

int run_attention(const AttentionArgs& a) {
  a.decoding.check();
  if (!a.json.empty()) check_output_file(a.json, "--json");
  if (!a.html.empty()) check_output_file(a.html, "--html");
  if (a.pictures())
    for (const char* kind : {"-encoder", "-decoder-self", "-decoder-cross"})
      for (const char* ext : {".png", ".svg"}) check_output_file(a.out + kind + ext, "--out");
  seq2seq::LoadedModel m = load_model_for_cli(a.model);
  const seq2seq::DecodeOptions options = a.decoding.options(m.config);
  const auto precision = a.decoding.precision_scope(m.net->parameters());
  const auto quantize = a.decoding.quantize_scope(m.config, m.net->parameters());
  data::check_utf8(a.sentence, "attention: input");
  // The best hypothesis; its maps come from one teacher-forced pass over its
  // tokens, which gives the weights the search computed for it.
  seq2seq::AttentionMaps maps;
  std::string text;
  if (m.config.tokenizer == seq2seq::TokenizerKind::word) {
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
  const viz::AttentionViewerView view = viewer_view(a, maps);
  // Every directory first: a path that cannot be one fails before anything is written.
  if (a.pictures()) ensure_parent(a.out);
  if (!a.json.empty()) ensure_parent(a.json);
  if (!a.html.empty()) ensure_parent(a.html);
  const std::vector<std::string> pictures =
      a.pictures() ? seq2seq::save_attention_figures(maps, m.net->num_heads(), a.out)
                   : std::vector<std::string>{};
  std::string json, html;
  if (!a.json.empty() || !a.html.empty())
    json = seq2seq::attention_maps_json(maps, a.sentence, text);
  if (!a.json.empty()) io::write_file_atomic(a.json, json);
  if (!a.html.empty()) {
    html = viz::attention_viewer_html(json, view);
    io::write_file_atomic(a.html, html);
  }
  fmt::print("{} => {}\n", a.sentence, text);
  if (!pictures.empty()) fmt::print("pictures: {} (and .svg)\n", fmt::join(pictures, ", "));
  if (!a.json.empty())
    fmt::print("weights: {} (every layer, head and kind, with the tokens)\n", a.json);
  if (!a.html.empty())
    fmt::print("viewer: {} ({} bytes, self-contained; open it in a browser)\n", a.html,
               html.size());
  return 0;
}

void setup_attention(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<AttentionArgs>();
  CLI::App* sub = add_model_command(
      parent, "attention",
      "Translate one sentence and draw every layer's and head's attention weights", a->model);
  sub->add_option("sentence", a->sentence, "The English sentence")->required();
  a->out_option =
      sub->add_option("--out", a->out,
                      "Path stem of the pictures (-encoder.png, ... are appended); drawn when "
                      "--out is given or neither --json nor --html is")
          ->capture_default_str();
  add_file_option(sub, "--json", a->json,
                  "Also write every weight (each layer, head and kind: encoder self-, decoder\n"
                  "self- and cross-attention, [layer][head][query][key]) with the tokens as JSON");
  add_file_option(sub, "--html", a->html,
                  "Also write an interactive viewer: one self-contained HTML page (no network)\n"
                  "to choose the kind, layer and head and hover a token to see its weights");
  sub->add_option("--layer", a->layer, "The viewer's first layer (1-based)")
      ->check(in_range(std::int64_t{1}, std::int64_t{1024}))
      ->capture_default_str();
  sub->add_option("--head", a->head, "The viewer's first head (1-based), or 'all' for their mean")
      ->check(CLI::Validator(
          [](const std::string& s) -> std::string {
            if (s == "all") return "";
            if (!s.empty() && s.size() < 5 &&
                s.find_first_not_of("0123456789") == std::string::npos && std::stoi(s) >= 1)
              return "";
            return fmt::format("'{}' is neither 'all' nor a head number from 1", s);
          },
          "all|N"))
      ->capture_default_str();
  sub->add_option("--kind", a->kind, "The viewer's first kind of attention")
      ->check(CLI::IsMember({"encoder", "decoder-self", "decoder-cross"}))
      ->option_text("encoder|decoder-self|decoder-cross (default: decoder-cross)");
  a->decoding.add_to(sub, /*with_n_best=*/false);
  set_action(sub, ctx, [a](const Context&) { return run_attention(*a); });
}

const Registration attention_reg{"", "attention", 13, setup_attention};

}  // namespace
}  // namespace attn::cli
