#include "train_log.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "attn/core/error.h"
#include "attn/io/atomic_file.h"
#include "attn/io/read_file.h"
#include "commands.h"
#include "train_output.h"

namespace attn::cli {

namespace fs = std::filesystem;

TrainLog::TrainLog(Options options) : o_(std::move(options)) {
  if (o_.silent) {
    o_.quiet = true;
    o_.file.clear();
  }
  tty_ = isatty(STDERR_FILENO) && !o_.quiet;
  if (!o_.file.empty()) {
    const fs::path p(o_.file);
    if (p.has_parent_path()) io::ensure_directory(p.parent_path());
    // The log is appended to, not replaced, but by the same rule: a link,
    // FIFO or device there is neither followed nor written (O_NOFOLLOW, and
    // the descriptor's own type checked against a swap since the check).
    io::check_output_path(p, "--log: ");
    const int fd = ::open(
        o_.file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
    ATTN_CHECK(fd >= 0, IOError, "cannot open the log '{}': {}", o_.file, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw IOError(
          fmt::format("--log: '{}' is not a regular file; attn does not write to it", o_.file));
    }
    ::fcntl(fd, F_SETFL, O_WRONLY | O_APPEND);
    file_ = ::fdopen(fd, "a");
    if (file_ == nullptr) {
      const int err = errno;
      ::close(fd);
      throw IOError(fmt::format("cannot open the log '{}': {}", o_.file, std::strerror(err)));
    }
  }
}

TrainLog::~TrainLog() {
  if (file_) std::fclose(file_);
}

void TrainLog::end_bar() {
  if (bar_) fmt::print(stderr, "\n");
  bar_ = false;
}

void TrainLog::line(const std::string& text) {
  if (o_.silent) return;
  end_bar();
  fmt::print("{}\n", text);
  flush_stdout();
  if (file_ && !file_error_) {
    if (std::fputs((text + "\n").c_str(), file_) < 0 || std::fflush(file_) != 0) file_error_ = true;
  }
}

void TrainLog::check() const {
  ATTN_CHECK(!file_error_, IOError, "write error on the log '{}'", o_.file);
}

void TrainLog::batch(const seq2seq::Progress& p) {
  const double done =
      o_.time_limit_s > 0
          ? std::min(1.0, p.seconds / o_.time_limit_s)
          : (static_cast<double>(p.epoch - 1) + static_cast<double>(p.batch) / p.num_batches) /
                p.num_epochs;
  const double eta = done > 0 ? p.seconds * (1 - done) / done : NAN;
  const double tok_s = p.tokens / std::max(p.seconds, 1e-9);
  if (tty_) {
    int width = 28, filled = static_cast<int>(done * width);
    fmt::print(stderr, "\r  epoch {:>{}}/{} [{}{}] loss {:.3f}  {:.0f} tok/s  ETA {}   ", p.epoch,
               std::to_string(p.num_epochs).size(), p.num_epochs, std::string(filled, '#'),
               std::string(width - filled, '.'), p.epoch_loss, tok_s, duration(eta));
    bar_ = true;
  }
  const bool due = o_.every > 0
                       ? p.step % o_.every == 0
                       : o_.every_seconds > 0 && p.seconds - last_line_s_ >= o_.every_seconds;
  if (due && (!tty_ || !o_.file.empty())) {
    last_line_s_ = p.seconds;
    std::string text =
        o_.per_token ? fmt::format(
                           "step {} epoch {} batch {}/{}: loss {:.4f} per token (ppl {:.2f}), "
                           "lr {:.3g}, {:.0f} tokens/s, {} elapsed, ETA {}",
                           p.step, p.epoch, p.batch, p.num_batches, p.epoch_loss,
                           std::exp(p.epoch_loss), p.lr, tok_s, duration(p.seconds), duration(eta))
                     : fmt::format(
                           "step {} epoch {} batch {}/{}: loss {:.4f} (d2l's), lr {:.3g}, {:.0f} "
                           "tokens/s, {} elapsed, ETA {}",
                           p.step, p.epoch, p.batch, p.num_batches, p.epoch_loss, p.lr, tok_s,
                           duration(p.seconds), duration(eta));
    if (tty_) {  // the bar stays on the terminal; the line goes to the file
      if (file_ && !file_error_ &&
          (std::fputs((text + "\n").c_str(), file_) < 0 || std::fflush(file_) != 0))
        file_error_ = true;
    } else {
      line(text);
    }
  }
}

void TrainLog::epoch(const seq2seq::Progress& p) {
  if (o_.quiet || o_.every > 0 || o_.every_seconds > 0) return;
  const std::int64_t every = std::max<std::int64_t>(1, p.num_epochs / 10);
  if (tty_ || (p.epoch % every != 0 && p.epoch != p.num_epochs)) return;
  line(fmt::format("  epoch {}/{}: loss {:.4f}, {:.0f} tokens/s, {:.1f} s", p.epoch, p.num_epochs,
                   p.epoch_loss, p.tokens / std::max(p.seconds, 1e-9), p.seconds));
}

void TrainLog::validation(const seq2seq::Validation& v, bool best) {
  line(fmt::format("valid step {}: loss {:.4f} per token, ppl {:.2f}, BLEU {:.2f}{}", v.step,
                   v.loss, v.perplexity, v.bleu, best ? " (best so far)" : ""));
}

void check_log_target(const std::string& path) {
  if (const std::string why = io::output_path_refusal(path); !why.empty())
    throw CLI::ValidationError("--log", why);
}

namespace {
// N of "N" or "Ns" and whether it counts seconds; n < 0 when neither.
std::pair<long long, bool> log_every_value(const std::string& text) {
  const bool seconds = !text.empty() && text.back() == 's';
  const std::string number = seconds ? text.substr(0, text.size() - 1) : text;
  if (number.empty() || number.size() > 10 ||
      number.find_first_not_of("0123456789") != std::string::npos)
    return {-1, seconds};
  const long long n = std::stoll(number);
  return {n <= 1'000'000'000 ? n : -1, seconds};
}
}  // namespace

std::string log_every_error(const std::string& text) {
  if (log_every_value(text).first >= 0) return {};
  return fmt::format("'{}' is not a number of steps (N) or seconds (Ns) in [0, 1000000000]", text);
}

void parse_log_every(const std::string& text, TrainLog::Options& o) {
  const auto [n, seconds] = log_every_value(text);
  if (n < 0) throw CLI::ValidationError("--log-every", log_every_error(text));
  if (seconds)
    o.every_seconds = static_cast<double>(n);
  else
    o.every = n;
}

}  // namespace attn::cli
