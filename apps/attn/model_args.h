// apps/attn/model_args.h — loading a model directory for a command.
#pragma once

#include <string>

#include "attn/seq2seq/model_dir.h"

namespace CLI {
class App;
}

namespace attn::cli {

// seq2seq::load_model, with a hint for a directory that has no manifest
// (a model from PyTorch or from an older attn): 'attn manifest DIR'.
seq2seq::LoadedModel load_model_for_cli(const std::string& dir);

// The subcommand `name` of a command that reads one model directory, with
// its required --model option into `dir`.
CLI::App* add_model_command(CLI::App& parent, const std::string& name, const std::string& help,
                            std::string& dir);

}  // namespace attn::cli
