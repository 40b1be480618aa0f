// apps/attn/train_output.h — where `attn train` writes: the model directory
// (created, locked, never a trained model replaced unasked), the metrics
// file, and the words it prints about them.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attn/io/dir_lock.h"
#include "attn/seq2seq/hparams.h"

namespace attn::cli {

// `s` as one word for a POSIX shell.
std::string shell_quote(const std::string& s);
// "1:02:03" or "2:03"; "--:--" for a time not known.
std::string duration(double seconds);

// What OutputDir will refuse, found before the data is read (which may take
// long), without touching the file system: a directory that holds a model
// or a checkpoint this run was not asked to replace (--overwrite) or
// continue (--resume); a directory another process trains into.
// Also refused early: an output of the run (train_outputs) that attn's one
// rule would not write (io::output_path_refusal: a link, a FIFO, a device).
void check_output_dir(const std::filesystem::path& dir, const seq2seq::RunSpec& run, bool resume,
                      bool overwrite);

// Every file a run writes in its directory: the model's files, the
// checkpoint, the pictures and a translator's split (data/*.tsv).
std::vector<std::filesystem::path> train_outputs(const std::filesystem::path& dir);

// The directory a run writes: created if missing, locked for the whole run
// (a second `attn train` into it is refused, naming this process), refused
// as check_output_dir says; what a killed run left is recovered and stale
// temp files are removed. With --overwrite, the previous run's checkpoint,
// pictures and split are removed before this run's first model is saved
// (remove_previous_run). If this run created it and fails before its first
// model is saved, the directory is removed again.
class OutputDir {
 public:
  OutputDir(const std::filesystem::path& dir, const seq2seq::RunSpec& run, bool resume,
            bool overwrite);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  // The directory now holds a model: it stays whatever happens next.
  void keep() { kept_ = true; }

 private:
  void remove_stale_temp_files() const;
  void remove_previous_run() const;
  void discard();

  std::filesystem::path dir_;
  bool created_ = false, kept_ = false;
  std::optional<io::DirectoryLock> lock_;
};

// An output file named by `option`, checked before the work: missing
// directories are created when the file is written (as for --out); what is
// at the target must be writable by attn's one rule (io::output_path_refusal:
// nothing, or a regular file that is not read-only), and the deepest
// existing directory on its path a writable directory. CLI::ValidationError
// naming `option` otherwise.
void check_output_file(const std::string& target, const std::string& option);
// --metrics-json, checked before training.
inline void check_metrics_target(const std::string& target) {
  check_output_file(target, "--metrics-json");
}

}  // namespace attn::cli
