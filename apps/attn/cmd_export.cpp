// attn export --onnx DIR FILE.onnx — a model directory as one ONNX model
// (seq2seq/onnx_export.h: a decoder step with its KV cache, the encoder run
// on the first step), for ONNX runtimes.
#include <memory>
#include <string>
#include <vector>

#include "attn/seq2seq/onnx_export.h"
#include "commands.h"
#include "model_args.h"
#include "train_output.h"

namespace attn::cli {
namespace {

constexpr const char* kExportFooter =
    "The ONNX model runs one decoder step with its KV cache as inputs and outputs\n"
    "(past_* in, present_* out, per layer) and runs the encoder when the\n"
    "cross-attention cache it is given is empty (the first step); batch and lengths\n"
    "are dynamic. It carries config.json and both vocabularies in its metadata.\n"
    "Opset 17. docs/model-format.md describes its inputs and outputs;\n"
    "tools/onnx_translate.mjs translates with it in ONNX Runtime.";

struct ExportArgs {
  std::vector<std::string> onnx;  // DIR, FILE
};

int run_export(const ExportArgs& a) {
  const std::string& dir = a.onnx.at(0);
  const std::string& file = a.onnx.at(1);
  check_output_file(file, "--onnx");
  seq2seq::LoadedModel m = load_model_for_cli(dir);
  seq2seq::export_onnx(m, file);
  const auto& c = m.config.transformer;
  fmt::print(
      "wrote {} (ONNX opset {}: {} layers, {} heads, num_hiddens {}, vocabularies {} / {})\n", file,
      seq2seq::kOnnxOpset, c.num_layers, c.num_heads, c.num_hiddens, c.src_vocab_size,
      c.tgt_vocab_size);
  if (m.config.tokenizer != seq2seq::TokenizerKind::word)
    fmt::print(
        "note: the graph maps ids to ids; this model's text goes through its SentencePiece model "
        "({}/spm.model, whose pieces are the vocabularies), which ONNX Runtime does not run: "
        "encode with it before the graph and decode after (tools/onnx_translate.mjs reads word "
        "models only)\n",
        dir);
  flush_stdout();
  return 0;
}

void setup_export(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* sub =
      parent.add_subcommand("export", "Write a model directory as an ONNX model (--onnx)");
  sub->footer(kExportFooter);
  sub->add_option("--onnx", a->onnx, "The model directory and the .onnx file to write")
      ->expected(2)
      ->option_text("DIR FILE.onnx")
      ->required();
  set_action(sub, ctx, [a](const Context&) { return run_export(*a); });
}

const Registration export_reg{"", "export", 15, setup_export};

}  // namespace
}  // namespace attn::cli
