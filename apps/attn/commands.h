// apps/attn/commands.h — how the attn CLI's commands plug in.
//
// main.cpp knows no command by name. Each command lives in its own file
// (cmd_train.cpp, cmd_translate.cpp, cmd_evaluate.cpp, cmd_attention.cpp,
// cmd_manifest.cpp, cmd_export.cpp, cmd_bench.cpp, cmd_demo.cpp with
// cmd_demo_chapter.cpp)
// and registers itself with a static Registration:
//
//   namespace {
//   void setup_train(CLI::App& parent, attn::cli::Context& ctx) {
//     CLI::App* sub = parent.add_subcommand("train", "Train a Transformer on fra-eng");
//     auto opts = std::make_shared<TrainArgs>();
//     sub->add_option("--out", opts->out, "...");
//     attn::cli::set_action(sub, ctx, [opts](const attn::cli::Context& c) { ...; return 0; });
//   }
//   const attn::cli::Registration reg{"", "train", 10, setup_train};
//   }  // namespace
//
// `parent` names where the command goes: "" for the top level, "demo" for a
// section of `attn demo` (the demo group adds its registered children with
// add_registered(..., "demo", ...)). Registrations are run in (order, name)
// order, which is the order `--help` lists them in; one registration may add
// several commands (the demo sections: one loop over their table).
//
// An action runs after the whole command line is parsed and the global options
// (--threads, --seed) are applied. It returns the exit code; errors are thrown
// (attn::Error for runtime failures, CLI::ValidationError for bad usage) and
// main turns them into one line on stderr.
#pragma once

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>

#include "attn/core/error.h"

namespace attn::cli {

// Options every command sees; filled in by main before an action runs.
struct GlobalOptions {
  int threads = 0;  // 0: ATTN_NUM_THREADS or OpenMP's default
  std::uint64_t seed = 0;
};

struct Context;
using Action = std::function<int(const Context&)>;

struct Context {
  GlobalOptions global;
  Action action;  // the action of the command that was parsed; set by set_action
};

using Setup = std::function<void(CLI::App& parent, Context& ctx)>;

// Registers a command (a static object per command; see the top of this file).
struct Registration {
  Registration(std::string parent, std::string name, int order, Setup setup);
};

// Adds every command registered under `parent` as a subcommand of `app`.
void add_registered(CLI::App& app, const std::string& parent, Context& ctx);

// Makes `action` the thing to run when `sub` is the command given.
inline void set_action(CLI::App* sub, Context& ctx, Action action) {
  sub->callback([&ctx, action = std::move(action)] { ctx.action = action; });
}

// An option naming a file (shown as FILE in --help).
inline CLI::Option* add_file_option(CLI::App* sub, const std::string& name, std::string& path,
                                    const std::string& help) {
  return sub->add_option(name, path, help)->option_text("FILE");
}

// A check for a numeric option in [lo, hi] that tells a value that is not a
// number ("'fast' is not a number", "'2.5' is not an integer") from one out
// of range ("100 is not in [1e-09, 10]"); CLI::Range calls both "not in range".
template <class T>
CLI::Validator in_range(T lo, T hi) {
  static_assert(std::is_arithmetic_v<T>);
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        const std::string out_of_range = fmt::format("{} is not in [{}, {}]", text, lo, hi);
        double d = 0;
        const bool number = CLI::detail::lexical_cast(text, d);
        if constexpr (std::is_integral_v<T>) {
          long long v = 0;
          if (CLI::detail::lexical_cast(text, v))
            return v >= static_cast<long long>(lo) && v <= static_cast<long long>(hi)
                       ? std::string()
                       : out_of_range;
          // Too large for a long long, or not a whole number at all.
          if (number && std::isfinite(d) && d == std::floor(d)) return out_of_range;
          return fmt::format("'{}' is not an integer", text);
        } else {
          if (!number) return fmt::format("'{}' is not a number", text);
          return d >= static_cast<double>(lo) && d <= static_cast<double>(hi) ? std::string()
                                                                              : out_of_range;
        }
      },
      fmt::format("in [{}, {}]", lo, hi));
}

// Flushes stdout; output that cannot be written (a full disk, a closed file)
// is an IOError ("write error: No space left on device"), so that a command
// stops instead of computing for nothing.
void flush_stdout();

// "1 thread", "2 threads": a count and its noun, singular for one.
inline std::string count_of(std::int64_t n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

// A runtime failure with a suggestion for the user: main prints
// "attn: error: <message>" and then "hint: <hint>".
class ErrorWithHint : public attn::Error {
 public:
  ErrorWithHint(const std::string& message, std::string hint)
      : attn::Error(message), hint_(std::move(hint)) {}
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

}  // namespace attn::cli
