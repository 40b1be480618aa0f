#include "train_output.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "attn/io/atomic_file.h"
#include "attn/io/file_set.h"
#include "attn/io/read_file.h"
#include "attn/seq2seq/checkpoint.h"
#include "attn/seq2seq/hparams.h"
#include "attn/seq2seq/model_dir.h"
#include "commands.h"

namespace attn::cli {

namespace fs = std::filesystem;

std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  long t = std::lround(s);
  return t >= 3600 ? fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
                   : fmt::format("{}:{:02}", t / 60, t % 60);
}

// `s` as one word for a POSIX shell.
std::string shell_quote(const std::string& s) {
  bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("/._-+,:@%", ch);
  });
  if (plain) return s;
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::vector<fs::path> train_outputs(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const char* name :
       {io::kManifestFile, "config.json", seq2seq::kWeightsFile, seq2seq::kCheckpointFile,
        "src_vocab.txt", "tgt_vocab.txt", seq2seq::kSpmFile, seq2seq::kTrainingFile})
    out.push_back(dir / name);
  for (const char* stem :
       {"loss", "bleu", "attention-encoder", "attention-decoder-self", "attention-decoder-cross"})
    for (const char* ext : {".png", ".svg"}) out.push_back(dir / (std::string(stem) + ext));
  for (const char* split : {"train.tsv", "valid.tsv", "test.tsv"})
    out.push_back(dir / "data" / split);
  return out;
}

namespace {

// The model settings (the flag rows of config.json's group) in which the
// model `dir` holds differs from `run`'s: "num_hiddens 8 (this run: 32)", ...
// Empty when they agree or when the directory's config cannot be read.
std::vector<std::string> differing_settings(const fs::path& dir, const seq2seq::RunSpec& run) {
  std::vector<std::string> out;
  seq2seq::RunSpec held;
  try {
    held.model = seq2seq::config_from_json(
        io::read_file_bytes((dir / "config.json").string(), seq2seq::kMaxConfigBytes),
        (dir / "config.json").string());
  } catch (const Error&) {
    return out;
  }
  for (const seq2seq::HParam& p : seq2seq::hparams()) {
    if (p.group != seq2seq::HGroup::model || p.flag == seq2seq::HFlag::none) continue;
    if (p.get(held) != p.get(run))
      out.push_back(fmt::format("{} {} (this run: {})", p.name, seq2seq::format_hvalue(p.get(held)),
                                seq2seq::format_hvalue(p.get(run))));
  }
  return out;
}

// Refuses a directory that holds a model or a checkpoint that this run was
// not asked to replace (--overwrite) or continue (--resume). The hint fits
// the case: --resume only where the model there is of this run's settings
// and has a checkpoint to continue.
void refuse_a_model(const fs::path& dir, const seq2seq::RunSpec& run) {
  std::vector<std::string> found;
  bool model = false, checkpoint = false;
  for (const fs::path& p : train_outputs(dir)) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(p, ec))) continue;
    const std::string name = fs::relative(p, dir, ec).string();
    found.push_back(name);
    checkpoint = checkpoint || name == seq2seq::kCheckpointFile;
    model = model || name == io::kManifestFile || name == "config.json" ||
            name == seq2seq::kWeightsFile;
  }
  if (found.empty()) return;
  if (found.size() > 4) {
    const std::size_t more = found.size() - 3;
    found.resize(3);
    found.push_back(fmt::format("{} more", more));
  }
  const std::string message =
      model || checkpoint
          ? fmt::format("train: '{}' already holds a model ({}); it is not replaced unasked",
                        dir.string(), fmt::join(found, ", "))
          : fmt::format(
                "train: '{}' already holds files a run writes ({}); they are not "
                "replaced unasked",
                dir.string(), fmt::join(found, ", "));
  const std::vector<std::string> other = differing_settings(dir, run);
  if (!other.empty())
    throw ErrorWithHint(message,
                        fmt::format("it is a model of other settings ({}): replace it with "
                                    "--overwrite, or choose another --out",
                                    fmt::join(other, ", ")));
  if (checkpoint)
    throw ErrorWithHint(message, fmt::format("continue its training with 'attn train --resume {}', "
                                             "replace it with --overwrite, or choose another --out",
                                             shell_quote(dir.string())));
  throw ErrorWithHint(message, "replace it with --overwrite, or choose another --out");
}

// What attn would write in `dir` must be writable by its one rule: a link,
// FIFO or device among the outputs is refused before the work, not found
// at its end.
void check_train_outputs(const fs::path& dir) {
  for (const fs::path& p : train_outputs(dir))
    if (const std::string why = io::output_path_refusal(p); !why.empty())
      throw CLI::ValidationError("--out", why);
}

}  // namespace

void check_output_dir(const fs::path& dir, const seq2seq::RunSpec& run, bool resume,
                      bool overwrite) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  check_train_outputs(dir);
  if (!resume && !overwrite) refuse_a_model(dir, run);
  if (io::directory_locked(dir))
    io::DirectoryLock probe(dir, "attn train");  // throws, naming the holder
}

OutputDir::OutputDir(const fs::path& dir, const seq2seq::RunSpec& run, bool resume, bool overwrite)
    : dir_(dir) {
  std::error_code ec;
  created_ = !fs::exists(fs::symlink_status(dir, ec));
  io::ensure_directory(dir);
  try {
    lock_.emplace(dir, "attn train");
    check_train_outputs(dir_);
    if (!resume && !overwrite) refuse_a_model(dir_, run);
    io::recover_file_set(dir);
    remove_stale_temp_files();
    if (overwrite && !resume) remove_previous_run();
  } catch (...) {
    discard();
    throw;
  }
}

OutputDir::~OutputDir() {
  if (!kept_) discard();
}

// --overwrite: what the previous run left beside its model goes before this
// run commits its first model — the checkpoint first, so that no moment
// shows the new model beside the old run's checkpoint (whatever fails
// later), then its pictures and split. The old model stays until the new
// one replaces it as one unit.
void OutputDir::remove_previous_run() const {
  // Only what attn wrote: a directory of another tool's files that --out
  // names keeps them (they are replaced one by one as this run writes its
  // own, as --overwrite asked).
  std::error_code ec;
  const bool attn_run = io::file_set_kind(dir_) == seq2seq::kModelKind ||
                        fs::exists(fs::symlink_status(dir_ / seq2seq::kCheckpointFile, ec));
  if (!attn_run) return;
  for (const fs::path& p : train_outputs(dir_)) {
    const std::string name = p.filename().string();
    const bool model_file =
        p.parent_path() == dir_ &&
        (std::find(seq2seq::kModelFiles.begin(), seq2seq::kModelFiles.end(), name) !=
             seq2seq::kModelFiles.end() ||
         name == seq2seq::kSpmFile || name == seq2seq::kTrainingFile || name == io::kManifestFile);
    if (model_file) continue;
    std::error_code ec;
    if (!fs::remove(p, ec) && ec)
      throw IOError(fmt::format("train --overwrite: cannot remove '{}' of the previous run: {}",
                                p.string(), ec.message()));
    if (name == seq2seq::kCheckpointFile) io::fsync_directory(dir_);
  }
}

// Temp files that a killed run left (".<name>.tmp.<unique>"): nobody else
// writes here while the lock is held.
void OutputDir::remove_stale_temp_files() const {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 1 && name[0] == '.' && name.find(".tmp.") != std::string::npos &&
        e.is_regular_file(ec))
      fs::remove(e.path(), ec);
  }
}

// A directory this run created goes again, but its contents only while this
// run holds the lock: a run refused the lock (two started at once into a new
// directory, both seeing it missing) found the directory in use, and what is
// inside is the other run's (its .pending files among them).
void OutputDir::discard() {
  if (!created_) return;
  std::error_code ec;
  if (lock_) {
    fs::remove_all(dir_ / io::kPendingDir, ec);  // before the lock goes
    lock_->release_and_remove();
  }
  fs::remove(dir_, ec);  // only if empty: never deletes a file of someone else's
}

void check_output_file(const std::string& target, const std::string& option) {
  const fs::path m(target);
  if (const std::string why = io::output_path_refusal(m); !why.empty())
    throw CLI::ValidationError(option, why);
  if (io::in_file_set(m))
    throw CLI::ValidationError(
        option, fmt::format("'{}' is a file of the model in '{}' (its manifest.json lists it); "
                            "attn does not replace it",
                            target, m.has_parent_path() ? m.parent_path().string() : "."));
  std::error_code ec;
  fs::path dir = m.has_parent_path() ? m.parent_path() : fs::path(".");
  while (!fs::exists(dir, ec) && dir.has_parent_path() && dir.parent_path() != dir)
    dir = dir.parent_path();
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw CLI::ValidationError(option, fmt::format("'{}' is not a directory", dir.string()));
  if (fs::is_directory(dir, ec) && ::access(dir.c_str(), W_OK) != 0)
    throw CLI::ValidationError(option, fmt::format("directory '{}' is not writable", dir.string()));
}

}  // namespace attn::cli
