// attn — the command-line tool.
//
// main sets up the global options, adds the registered commands (commands.h),
// parses, runs the chosen command's action, and turns every error into one
// line on stderr:
//   usage errors (CLI11)        attn: error: <message>
//                               Run 'attn --help' for usage.          exit 2
//   attn::Error, std::exception attn: error: <message> [+ hint: ...]  exit 1
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <malloc.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "attn/core/env.h"
#include "attn/core/error.h"
#include "attn/core/rng.h"
#include "attn/core/threads.h"
#include "attn/ops/attention.h"
#include "attn/version.h"
#include "commands.h"
#include "mpi_comm.h"
#include "precision_flag.h"
#include "signals.h"
#include "suggest.h"

namespace {

constexpr const char* kDescription =
    "attn: the attention mechanisms and the Transformer of Dive into Deep Learning\n"
    "(d2l, chapter \"Attention Mechanisms\"), written in C++20 from the tensor up:\n"
    "its own tensors and autograd, oneDNN for matrix products, CPU only.\n";

// The footer of `attn --help`: where to go next, how the threads adapt, and
// every environment variable attn reads (attn/core/env.h's table).
std::string footer() {
  std::string text =
      "Run 'attn <command> --help' for the options of a command.\n"
      "While other processes keep the cores busy, attn runs on one thread, and while\n"
      "its threads sit on cores far apart it forks only large ops (the same results\n"
      "either way); ATTN_ADAPTIVE_THREADS=0 turns both off.\n"
      "\n"
      "Environment:";
  for (const attn::EnvVarInfo& v : attn::env_vars())
    text += fmt::format("\n  {}={}\n      {}", v.name, v.values, v.meaning);
  return text;
}

// Messages go out on one line: newlines become "; ".
std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "; ";
    } else {
      out += c;
    }
  }
  return out;
}

// The lines go out in one write: under mpirun several processes may report
// at once, and each line names its process (attn::cli::process_label).
void print_error(const std::string& message, const std::string& hint = "",
                 const std::string& tail = "") {
  std::fflush(stdout);
  std::string text = "attn: error: " + attn::cli::process_label() + one_line(message) + "\n";
  if (!hint.empty()) text += "hint: " + one_line(hint) + "\n";
  text += tail;
  std::cerr << text << std::flush;
}

int usage_error(const std::string& message, const std::string& hint = "",
                const std::string& command = "attn") {
  print_error(message, hint, fmt::format("Run '{} --help' for usage.\n", command));
  return 2;
}

// `attn --version`: the version, what the library was compiled for, and the
// attention kernels this run uses (chosen at run time; ATTN_ISA overrides).
std::string version_text() {
  const std::string isa = attn::attention_kernel_config().isa;  // a bad ATTN_ISA throws
  const std::string isas = fmt::format("{}", fmt::join(attn::attention_isas(), ", "));
  const auto cap = attn::isa_cap();
  const std::string why = cap ? fmt::format("ATTN_ISA={}; this CPU runs: {}", *cap, isas)
                              : fmt::format("the best of: {}; ATTN_ISA chooses another", isas);
  return fmt::format("attn {}\ncompiled for: {}\nattention kernels: {} ({})\n{}\n{}\n{}",
                     attn::version(), attn::compiled_for(), isa, why, attn::cli::bf16_description(),
                     attn::cli::int8_description(), attn::cli::mpi_description());
}

// A seed is a whole number in [0, 2^64).
const CLI::Validator kSeedValidator(
    [](std::string& text) -> std::string {
      std::uint64_t value = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size())
        return "Value " + text + " is not a whole number in [0, 2^64)";
      return "";
    },
    "N");

// "'attn demo' needs a command (one of: core)" for a command line that stops at
// a group. (CLI11's require_subcommand would report this before an unknown flag.)
std::string missing_command(CLI::App& app) {
  CLI::App* group = &app;
  std::string path = "attn";
  while (!group->get_subcommands().empty()) {
    group = group->get_subcommands().front();
    path += " " + group->get_name();
  }
  std::string names;
  for (const CLI::App* sub : group->get_subcommands([](const CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + sub->get_name();
  return fmt::format("'{}' needs a command (one of: {})", path, names);
}

// Output that was lost is an error, as in coreutils' close_stdout: a full
// disk or a closed file behind stdout turns exit 0 into exit 1 with one line.
int close_stdout(int rc) {
  if (rc != 0) {  // an error was reported already; one line is enough
    std::fclose(stdout);
    return rc;
  }
  errno = 0;
  bool lost = std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  int err = errno;
  if (std::fclose(stdout) != 0 && !lost) {
    lost = true;
    err = errno;
  }
  if (!lost) return 0;
  print_error(err != 0 ? fmt::format("write error: {}", std::strerror(err))
                       : std::string("write error on standard output"));
  return 1;
}

int run(int argc, char** argv) {
  try {
    attn::cli::start_signal_thread();  // before any other thread exists (signals.h)
    CLI::App app{kDescription, "attn"};
    app.set_version_flag("--version", version_text,
                         "Print the version, what attn was compiled for, the kernels it runs");
    app.footer(footer());

    attn::cli::Context ctx;
    app.add_option("--threads", ctx.global.threads,
                   "Threads for attn and oneDNN (default: ATTN_NUM_THREADS, else all cores)")
        ->check(attn::cli::in_range(1, 1024))
        ->option_text("N");
    app.add_option("--seed", ctx.global.seed, "Seed for every random draw (default 0)")
        ->check(kSeedValidator)
        ->option_text("N");
    // attn's own options may also follow the command (`attn translate
    // --threads 2`): a command hands the options it does not know up to attn.
    app.fallthrough();
    attn::cli::add_registered(app, "", ctx);

    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
      // A mistyped flag or command, the nearest one; a bad value: the --help
      // of the command being parsed.
      const attn::cli::UsageError u = attn::cli::usage_error_of(app, e, argc, argv);
      return usage_error(u.message, u.hint, u.command.empty() ? "attn" : u.command);
    }
    if (!ctx.action) return usage_error(missing_command(app));
    attn::check_env();  // a variable set to what it cannot be is one line, exit 1

    if (ctx.global.threads > 0) {
      attn::set_num_threads(ctx.global.threads);
    } else if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) {
      // Under mpirun the cores are shared by the processes on this machine.
      const int n = std::atoi(local);
      if (n > 1) attn::set_num_threads(std::max(1, attn::get_num_threads() / n));
    }
    attn::manual_seed(ctx.global.seed);
    return ctx.action(ctx);
  } catch (const CLI::ParseError& e) {  // a usage error found by an action
    return usage_error(e.what());
  } catch (const attn::cli::ErrorWithHint& e) {
    print_error(e.what(), e.hint());
  } catch (const attn::InternalError& e) {
    print_error(e.what(), "this is a bug in attn; please report it with the command you ran");
  } catch (const attn::Error& e) {
    print_error(e.what());
  } catch (const std::bad_alloc&) {
    print_error("out of memory", "try a smaller batch size or model");
  } catch (const std::exception& e) {
    print_error(e.what());
  } catch (...) {
    print_error("unknown exception");
  }
  return 1;
}

// glibc's malloc maps every block above its threshold anew and unmaps it
// when it is freed, and gives the heap's top back: a decoding step that
// allocates and frees a few MB (beam search's logits: 128 rows x 8,000
// floats) then faults the same memory in again, zeroed, at every step. The
// tool keeps freed memory, as bench/'s PyTorch peer is told to (and as
// jemalloc and tcmalloc do): blocks up to 32 MB (glibc's largest
// threshold) come from the heap, which is trimmed only past 1 GB free at
// its top; larger blocks are still mapped on their own. The library leaves
// malloc's settings to the program.
void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory();
  const int rc = run(argc, argv);
  // An error on one process of an mpirun ends them all (130 and 143, a
  // stop all the processes agreed on, end each one normally).
  if (rc == 1 || rc == 2) attn::cli::mpi_abort_world(rc);
  return close_stdout(rc);
}
