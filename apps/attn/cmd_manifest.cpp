// attn manifest DIR — vouch for a model directory written by another tool.
#include <filesystem>
#include <memory>
#include <string>

#include "attn/io/file_set.h"
#include "attn/seq2seq/model_dir.h"
#include "commands.h"
#include "model_args.h"

namespace attn::cli {

seq2seq::LoadedModel load_model_for_cli(const std::string& dir) {
  try {
    return seq2seq::load_model(dir);
  } catch (const io::MissingManifestError& e) {
    // A directory without the model's files (pictures, a log) is not one
    // that needs a manifest: say what it lacks instead.
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::path(dir) / "config.json", ec))
      throw ErrorWithHint(fmt::format("'{}' holds no model (no config.json)", dir),
                          "a model directory is what 'attn train --out DIR' writes");
    throw ErrorWithHint(e.what(),
                        fmt::format("a model written by PyTorch or an older attn: check it and "
                                    "write its manifest with 'attn manifest {}'",
                                    dir));
  }
}

CLI::App* add_model_command(CLI::App& parent, const std::string& name, const std::string& help,
                            std::string& dir) {
  CLI::App* sub = parent.add_subcommand(name, help);
  sub->add_option("--model", dir, "Model directory written by 'attn train'")->required();
  return sub;
}

namespace {

constexpr const char* kManifestFooter =
    "A model directory holds config.json, model.safetensors, src_vocab.txt and\n"
    "tgt_vocab.txt, and manifest.json: the size and SHA-256 of each. attn reads a\n"
    "model only when every file matches its manifest, so files that do not belong\n"
    "together (edited, swapped, copied from another model, or left half-replaced by\n"
    "a crash) are refused. 'attn train' writes the manifest; this command writes it\n"
    "for a directory made by other tools (a d2l PyTorch export, an older attn),\n"
    "after checking the four files exactly as 'attn translate' would.\n"
    "The manifest can be checked by hand: sha256sum config.json model.safetensors ...";

struct ManifestArgs {
  std::string dir;
};

void setup_manifest(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<ManifestArgs>();
  CLI::App* sub = parent.add_subcommand(
      "manifest", "Check a model directory's files and write its manifest.json");
  sub->footer(kManifestFooter);
  sub->add_option("dir", a->dir, "The model directory")->required();
  set_action(sub, ctx, [a](const Context&) {
    seq2seq::write_model_manifest(a->dir);
    fmt::print("wrote {}/{}\n", a->dir, io::kManifestFile);
    return 0;
  });
}

const Registration manifest_reg{"", "manifest", 14, setup_manifest};

}  // namespace
}  // namespace attn::cli
