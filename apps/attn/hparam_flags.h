// apps/attn/hparam_flags.h — the hyperparameter table (seq2seq/hparams.h) as
// flags of a command: one option per row, its range checked while parsing
// (a usage error, exit 2), its default shown in --help.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <set>
#include <string>

#include "attn/seq2seq/hparams.h"

namespace attn::cli {

class HParamFlags {
 public:
  // Adds `--name` for every row whose flag is HFlag::command; `defaults`
  // gives the values --help shows.
  void add_to(CLI::App* sub, const seq2seq::RunSpec& defaults);
  // After parsing: the rows given on the command line (a global row such as
  // --seed counts when `global` was given).
  void collect(const CLI::App* sub, const CLI::App* parent);
  bool given(std::string_view name) const { return given_.count(std::string(name)) > 0; }
  const std::set<std::string>& given_names() const { return given_; }
  // Sets every given command row in `run` (global rows are the caller's).
  void apply(seq2seq::RunSpec& run) const;
  // The value given for a row (must be given).
  seq2seq::HValue value(const seq2seq::HParam& p) const;

 private:
  std::map<std::string, std::string> text_;
  std::map<std::string, bool> switches_;  // the boolean rows: flags without a value
  std::set<std::string> given_;
};

}  // namespace attn::cli
