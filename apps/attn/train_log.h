// apps/attn/train_log.h — progress a user can see during `attn train`.
//
// On a terminal, a progress bar on stderr (unless --quiet). Without one,
// lines on stdout: with --log-every N a line every N steps, with
// --log-every Ns one at the first step N seconds after the last (step, epoch,
// loss per token and perplexity, learning rate, tokens/s, elapsed time, ETA),
// else d2l's line every tenth of the epochs. Validations get a line each. With
// --log FILE every line also goes to FILE (appended, flushed at once), so a
// run can be followed with `tail -f` whatever the terminal does.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "attn/seq2seq/trainer.h"

namespace attn::cli {

class TrainLog {
 public:
  struct Options {
    bool quiet = false;
    std::int64_t every = 0;  // steps between lines (0: d2l's per-epoch lines)
    double every_seconds = 0;  // or seconds between lines (0: by steps)
    std::string file;  // --log ("": none)
    bool per_token = true;  // the loss is a per-token cross-entropy (print perplexity too)
    double time_limit_s = 0;  // for the ETA (0: by epochs)
    bool silent = false;  // nothing at all (the other processes of an mpirun)
    // Off a terminal without --log-every: a progress line whenever a minute
    // has passed without one, so that output sent to a file shows life.
    double quiet_gap_s = 0;
  };
  explicit TrainLog(Options options);
  ~TrainLog();
  TrainLog(const TrainLog&) = delete;
  TrainLog& operator=(const TrainLog&) = delete;

  void batch(const seq2seq::Progress& p);
  void epoch(const seq2seq::Progress& p);
  void validation(const seq2seq::Validation& v, bool best);
  // A line on stdout (and in the file); ends a progress bar first.
  void line(const std::string& text);
  // Ends the progress bar (a newline on stderr) if one is drawn.
  void end_bar();
  // IOError when a line could not be written to the log file.
  void check() const;

 private:
  Options o_;
  bool tty_ = false, bar_ = false;
  std::FILE* file_ = nullptr;
  bool file_error_ = false;
  double last_line_s_ = 0;  // when the last --log-every line was written
};

// --log-every's value: "N" steps or "Ns" seconds, N in [0, 10^9]. The error
// for any other text ("" when it is one), and the parse, which sets one of
// the two fields of `o` (CLI::ValidationError for a bad text).
std::string log_every_error(const std::string& text);
// The seconds after which a run whose output goes to a file or a pipe
// prints a progress line when --log-every is not given.
inline constexpr double kQuietGapSeconds = 60;
void parse_log_every(const std::string& text, TrainLog::Options& o);

// "--log FILE": the file is created (with missing directories) and appended
// to; refused when it exists and is not a regular file. Checked before
// training (CLI::ValidationError).
void check_log_target(const std::string& path);

}  // namespace attn::cli
