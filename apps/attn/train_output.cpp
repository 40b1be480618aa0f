#include "train_output.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "attn/io/atomic_file.h"
#include "attn/io/file_set.h"
#include "attn/io/read_file.h"
#include "attn/seq2seq/checkpoint.h"
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

namespace {

// Refuses a directory that holds a model or a checkpoint that this run was
// not asked to replace (--overwrite) or continue (--resume).
void refuse_a_model(const fs::path& dir) {
  std::string found;
  for (const std::string& name :
       {std::string(io::kManifestFile), std::string("config.json"),
        std::string("model.safetensors"), std::string(seq2seq::kCheckpointFile)}) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(dir / name, ec))) found += (found.empty() ? "" : ", ") + name;
  }
  if (!found.empty())
    throw ErrorWithHint(
        fmt::format("train: '{}' already holds a model ({}); it is not replaced unasked",
                    dir.string(), found),
        fmt::format("continue its training with 'attn train --resume {0}', replace it with "
                    "--overwrite, or choose another --out",
                    shell_quote(dir.string())));
}

}  // namespace

void check_output_dir(const fs::path& dir, bool resume, bool overwrite) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  if (!resume && !overwrite) refuse_a_model(dir);
  if (io::directory_locked(dir))
    io::DirectoryLock probe(dir, "attn train");  // throws, naming the holder
}

OutputDir::OutputDir(const fs::path& dir, bool resume, bool overwrite) : dir_(dir) {
  std::error_code ec;
  created_ = !fs::exists(fs::symlink_status(dir, ec));
  io::ensure_directory(dir);
  try {
    lock_.emplace(dir, "attn train");
    if (!resume && !overwrite) refuse_a_model(dir_);
    io::recover_file_set(dir);
    remove_stale_temp_files();
  } catch (...) {
    discard();
    throw;
  }
}

OutputDir::~OutputDir() {
  if (!kept_) discard();
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
  struct stat st {};
  if (::lstat(m.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw CLI::ValidationError(
        option, fmt::format("'{}' is {}, not a regular file; attn does not replace it", target,
                            io::file_kind(st.st_mode)));
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
