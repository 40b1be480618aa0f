// apps/attn/suggest.h — what a mistyped flag or command was probably meant
// to be: CLI11's "The following argument was not expected" turned into a
// message in the order the words were typed, the nearest flag or command
// of the command being parsed, and that command's --help.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace attn::cli {

// The nearest of `names` to `word` (Damerau-Levenshtein: insertions,
// deletions, substitutions and swaps of neighbours), if it is within 2
// edits and a third of the word's length; else "".
std::string nearest(std::string_view word, const std::vector<std::string>& names);

struct UsageError {
  std::string message;  // "The following argument was not expected: --beamsize"
  std::string hint;  // "did you mean --beam-size?", or ""
  std::string command;  // "attn translate": whose --help to read
};

// The usage error of `e` after `app` failed to parse argv: for arguments
// it did not expect, listed as typed, with the nearest flag or command of
// the deepest command parsed; any other error as CLI11 says it.
UsageError usage_error_of(CLI::App& app, const CLI::ParseError& e, int argc,
                          const char* const* argv);

}  // namespace attn::cli
