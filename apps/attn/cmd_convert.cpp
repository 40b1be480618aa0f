// attn convert --dtype bf16|int8|f32 IN OUT — a model directory with its
// weights stored narrower (seq2seq/model_dir.h: WeightsDType), for shipping:
// the same model, the same files and a new manifest.
#include <filesystem>
#include <memory>
#include <string>

#include "attn/io/atomic_file.h"
#include "attn/io/file_set.h"
#include "attn/io/read_file.h"
#include "attn/seq2seq/hparams.h"
#include "attn/seq2seq/model_dir.h"
#include "commands.h"
#include "model_args.h"

namespace attn::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConvertFooter =
    "--dtype bf16 stores every weight matrix in bfloat16 (half the bytes), --dtype\n"
    "int8 every matrix in int8 with one f32 scale per row (a quarter), quantized\n"
    "as --quantize int8 quantizes weights; biases and layer norms stay f32. The\n"
    "weights are f32 again when read: translate, evaluate, attention, serve and\n"
    "export read OUT as any model. OUT gets the model's files, a new manifest and\n"
    "the held-out split (data/valid.tsv, data/test.tsv) where IN has one;\n"
    "an existing OUT is replaced only with --overwrite, and only when it holds a\n"
    "model. --source-lang and --target-lang record (or correct) the languages.";

struct ConvertArgs {
  std::string dtype;
  std::string in, out;
  std::string source_lang, target_lang;
  bool overwrite = false;
};

// OUT: nothing there, an empty directory, or (with --overwrite) a model
// directory; never IN itself.
void check_convert_output(const ConvertArgs& a) {
  std::error_code ec;
  if (fs::equivalent(a.in, a.out, ec))
    throw ErrorWithHint(fmt::format("'{}' is the model being converted", a.out),
                        "write the converted model to another directory");
  const fs::file_status st = fs::symlink_status(a.out, ec);
  if (!fs::exists(st)) return;
  ATTN_CHECK(fs::is_directory(st), IOError, "'{}' is not a directory; attn does not replace it",
             a.out);
  if (fs::is_empty(a.out, ec)) return;
  if (io::file_set_kind(a.out) == seq2seq::kModelKind) {
    if (a.overwrite) return;
    throw ErrorWithHint(fmt::format("'{}' already holds a model", a.out),
                        "--overwrite replaces it");
  }
  throw IOError(
      fmt::format("'{}' is not empty and holds no model; attn writes a model only into "
                  "a new or empty directory",
                  a.out));
}

// The held-out split a translator was scored on (IN/data/valid.tsv and
// test.tsv, as attn train writes them) goes with it, so that OUT can be
// scored the same way (attn evaluate --split test). The training pairs stay.
void copy_held_out_split(const std::string& in, const std::string& out) {
  for (const char* name : {"valid.tsv", "test.tsv"}) {
    const fs::path from = fs::path(in) / "data" / name;
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(from, ec))) continue;
    const io::InputFile f(from.string());
    io::ensure_directory(fs::path(out) / "data");
    io::write_file_atomic(fs::path(out) / "data" / name, f.read_all(std::uint64_t{1} << 32));
  }
}

int run_convert(const ConvertArgs& a) {
  const seq2seq::WeightsDType dtype = seq2seq::parse_weights_dtype(a.dtype);
  check_convert_output(a);
  seq2seq::LoadedModel m = load_model_for_cli(a.in);
  if (!a.source_lang.empty()) m.config.source_lang = a.source_lang;
  if (!a.target_lang.empty()) m.config.target_lang = a.target_lang;
  seq2seq::validate_model(m.config);
  seq2seq::ModelExtras extras{m.spm_model, m.training_json, m.run_id, dtype};
  seq2seq::save_model(a.out, *m.net, m.config, m.src_vocab, m.tgt_vocab, extras);
  copy_held_out_split(a.in, a.out);
  std::error_code ec;
  const auto in_bytes = fs::file_size(fs::path(a.in) / seq2seq::kWeightsFile, ec);
  const auto out_bytes = fs::file_size(fs::path(a.out) / seq2seq::kWeightsFile, ec);
  fmt::print("wrote {}: weights in {} ({:.1f} MB, from {:.1f} MB in {}){}\n", a.out,
             seq2seq::weights_dtype_name(dtype), static_cast<double>(out_bytes) / 1e6,
             static_cast<double>(in_bytes) / 1e6, seq2seq::weights_dtype_name(m.weights),
             m.config.source_lang.empty()
                 ? ""
                 : fmt::format(", {} to {}", m.config.source_lang, m.config.target_lang));
  flush_stdout();
  return 0;
}

void setup_convert(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<ConvertArgs>();
  CLI::App* sub = parent.add_subcommand(
      "convert", "Write a model directory with its weights stored in bf16 or int8");
  sub->footer(kConvertFooter);
  sub->add_option("--dtype", a->dtype, "How OUT stores the weight matrices")
      ->required()
      ->check(CLI::IsMember({"f32", "bf16", "int8"}));
  sub->add_option("in", a->in, "The model directory to convert")->required();
  sub->add_option("out", a->out, "The model directory to write")->required();
  auto lang = [](std::string& text) -> std::string {
    return seq2seq::is_language_code(text) ? ""
                                           : "'" + text +
                                                 "' is not an ISO 639-1 code (two "
                                                 "lowercase letters, as en or fr)";
  };
  sub->add_option("--source-lang", a->source_lang, "The language OUT records it reads")
      ->check(CLI::Validator(lang, "CODE"));
  sub->add_option("--target-lang", a->target_lang, "The language OUT records it writes")
      ->check(CLI::Validator(lang, "CODE"));
  sub->add_flag("--overwrite", a->overwrite, "Replace the model in OUT");
  set_action(sub, ctx, [a](const Context&) { return run_convert(*a); });
}

const Registration convert_reg{"", "convert", 15, setup_convert};

}  // namespace
}  // namespace attn::cli
