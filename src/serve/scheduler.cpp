// One model's decoding loop (src/serve/scheduler.h).
#include "serve/scheduler.h"

#include <algorithm>
#include <optional>

#include "attn/core/error.h"
#include "attn/core/threads.h"
#include "attn/ops/quantize.h"
#include "attn/seq2seq/report.h"
#include "attn/seq2seq/translator.h"

namespace attn::serve {

Scheduler::Scheduler(std::string name, seq2seq::LoadedModel& model, SchedulerOptions options,
                     Metrics& metrics)
    : name_(std::move(name)), model_(model), options_(options), metrics_(metrics) {
  const data::Vocab& tv = model_.tokenizer->vocab(data::Side::target);
  bos_ = tv["<bos>"];
  eos_ = tv["<eos>"];
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  stop();
  if (thread_.joinable()) thread_.join();
}

bool Scheduler::submit(std::shared_ptr<Job> job) {
  ATTN_CHECK(!job->sentences.empty(), InternalError, "Scheduler::submit: a job of no sentence");
  std::lock_guard<std::mutex> lock(mu_);
  const auto n = static_cast<std::int64_t>(job->sentences.size());
  if (stopping_ || queued_sentences_ + n > options_.max_queue) return false;
  job->hypotheses.resize(job->sentences.size());
  if (job->attention) job->attention_json.resize(job->sentences.size());
  queued_sentences_ += n;
  queue_.push_back(std::move(job));
  cv_.notify_one();
  return true;
}

void Scheduler::wake() {
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_one();
}

void Scheduler::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  cv_.notify_one();
}

std::int64_t Scheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_sentences_;
}

std::int64_t Scheduler::cost(std::int64_t source_length,
                             const seq2seq::DecodeOptions& options) const {
  const std::int64_t limit = seq2seq::max_decode_length(source_length, model_.net->max_len(),
                                                        seq2seq::text_decode_options(options));
  return options.beam_size * (source_length + limit);
}

void Scheduler::finish(const std::shared_ptr<Job>& job, Outcome outcome) {
  if (job->ended) return;
  job->ended = true;
  // Called once and dropped: what it holds (the exchange) goes with it.
  auto on_done = std::move(job->on_done);
  job->on_done = nullptr;
  static const char* const kReason[] = {"done", "timed_out", "cancelled", "failed", "shut_down"};
  if (outcome != Outcome::done)
    metrics_.sentences_dropped(kReason[static_cast<int>(outcome)],
                               static_cast<std::int64_t>(job->sentences.size() - job->finished));
  if (on_done) on_done(outcome);
}

std::int64_t Scheduler::max_rows(std::int64_t beam_size) const {
  const std::int64_t sentences =
      options_.max_batch_size > 0
          ? options_.max_batch_size
          : static_cast<std::int64_t>(seq2seq::automatic_batch_size(beam_size));
  return sentences * beam_size;
}

// Sentences from the head of the queue, while the budget allows (always
// the head when the batch is empty); jobs that were cancelled or ran past
// their deadline while they waited leave the queue.
void Scheduler::admit(seq2seq::DecodingBatch& batch) {
  std::vector<std::pair<std::shared_ptr<Job>, Outcome>> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Job::Clock::now();
    while (!queue_.empty()) {
      std::shared_ptr<Job> job = queue_.front();
      const bool cancelled = job->cancelled.load();
      if (cancelled || job->ended || now > job->deadline) {  // ended: failed part-way
        queued_sentences_ -= static_cast<std::int64_t>(job->sentences.size() - job->admitted);
        queue_.pop_front();
        ended.emplace_back(job, cancelled ? Outcome::cancelled : Outcome::timed_out);
        continue;
      }
      const Job::Sentence& s = job->sentences[job->admitted];
      const std::int64_t c = cost(static_cast<std::int64_t>(s.ids.size()), job->options);
      const std::int64_t rows = job->options.beam_size;
      if (!live_.empty() &&
          (used_tokens_ + c > options_.max_batch_tokens || used_rows_ + rows > max_rows(rows)))
        break;
      const auto handle = batch.add(s.ids, seq2seq::text_decode_options(job->options));
      live_.push_back({handle, Live{job, job->admitted, c, rows}});
      used_tokens_ += c;
      used_rows_ += rows;
      ++job->admitted;
      --queued_sentences_;
      if (job->admitted == job->sentences.size()) queue_.pop_front();
    }
  }
  for (auto& [job, outcome] : ended) {
    drop_ended(batch);  // its sentences already in the batch, if any
    finish(job, outcome);
  }
}

// Live sentences whose job was cancelled, ran out of time or ended leave the
// batch (their rows freed before the next step).
void Scheduler::drop_ended(seq2seq::DecodingBatch& batch) {
  const auto now = Job::Clock::now();
  std::vector<std::pair<std::shared_ptr<Job>, Outcome>> ended;
  for (auto it = live_.begin(); it != live_.end();) {
    const std::shared_ptr<Job>& job = it->second.job;
    const bool cancelled = job->cancelled.load();
    if (!job->ended && !cancelled && now <= job->deadline) {
      ++it;
      continue;
    }
    if (!job->ended) ended.emplace_back(job, cancelled ? Outcome::cancelled : Outcome::timed_out);
    batch.remove(it->first);
    used_tokens_ -= it->second.cost;
    used_rows_ -= it->second.rows;
    it = live_.erase(it);
  }
  for (auto& [job, outcome] : ended) {
    finish(job, outcome);
    // A job partly admitted leaves the queue too.
    std::lock_guard<std::mutex> lock(mu_);
    auto q = std::find(queue_.begin(), queue_.end(), job);
    if (q != queue_.end()) {
      queued_sentences_ -= static_cast<std::int64_t>(job->sentences.size() - job->admitted);
      queue_.erase(q);
    }
  }
}

void Scheduler::decode_step(seq2seq::DecodingBatch& batch) {
  const std::int64_t rows = batch.rows();
  std::vector<seq2seq::DecodingBatch::Done> done;
  try {
    done = batch.step();
  } catch (const std::exception& e) {
    // Every sentence of the batch fails; the loop goes on with a new batch.
    for (auto& [handle, l] : live_) {
      if (l.job->ended) continue;
      l.job->error = e.what();
      finish(l.job, Outcome::failed);
      batch.remove(handle);
    }
    live_.clear();
    used_tokens_ = used_rows_ = 0;
    return;
  }
  // Before any job is answered: its client's next request must see this
  // loop's load without the sentences that just finished.
  in_batch_.store(batch.sentences(), std::memory_order_relaxed);
  metrics_.step_done(rows, rows);
  for (auto& d : done) {
    auto it = std::find_if(live_.begin(), live_.end(),
                           [&](const auto& l) { return l.first == d.handle; });
    if (it == live_.end()) continue;
    const Live l = it->second;
    live_.erase(it);
    used_tokens_ -= l.cost;
    used_rows_ -= l.rows;
    Job& job = *l.job;
    if (job.ended) continue;
    job.hypotheses[l.index] = std::move(d.hypotheses);
    if (job.attention && !job.hypotheses[l.index].empty()) {
      try {
        const Job::Sentence& s = job.sentences[l.index];
        const seq2seq::TextTranslation t = seq2seq::text_translation(
            *model_.tokenizer, s.text, s.ids, job.hypotheses[l.index].front());
        const seq2seq::AttentionMaps maps =
            seq2seq::attention_maps(*model_.net, *model_.tokenizer, t);
        job.attention_json[l.index] = seq2seq::attention_maps_json(maps, s.text, t.text);
      } catch (const std::exception& e) {
        job.error = e.what();
        finish(l.job, Outcome::failed);
        continue;
      }
    }
    if (++job.finished == job.sentences.size()) finish(l.job, Outcome::done);
  }
}

void Scheduler::run() {
  if (options_.threads > 0) set_num_threads(options_.threads);
  // The model's weights are frozen for the loop's life: kept copies, packed
  // once (ops/precision.h); int8 weights quantized once (ops/quantize.h).
  const std::vector<Tensor> params = model_.net->parameters();
  PrecisionScope precision(options_.precision, params);
  std::optional<QuantizeScope> quantize;
  if (options_.int8) quantize.emplace(params);
  seq2seq::DecodingBatch batch(*model_.net, bos_, eos_);
  batch.keep_caches(true);
  // Counted busy from the wake-up with work to the step that leaves none.
  const auto& busy_loops = options_.busy_loops;
  bool busy = false;
  int team = options_.threads;  // the threads of this thread's ops now
  int alone_steps = 0;  // this loop's steps in a row with the others idle
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (busy && queue_.empty() && live_.empty()) {
        busy = false;
        if (busy_loops) busy_loops->fetch_sub(1, std::memory_order_relaxed);
      }
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !live_.empty(); });
      if (stopping_) break;
      if (!busy) {
        busy = true;
        if (busy_loops) busy_loops->fetch_add(1, std::memory_order_relaxed);
      }
    }
    drop_ended(batch);
    admit(batch);
    if (batch.sentences() > 0) {
      // The same bits on any number of threads (BatchInvariant), so the
      // team may follow the other loops' work from step to step.
      // Only after three steps alone: under a steady load the other loops
      // empty for a moment between requests, and a team formed then
      // shares the cores with the loop that wakes.
      if (options_.lone_threads > options_.threads && busy_loops) {
        alone_steps = busy_loops->load(std::memory_order_relaxed) <= 1 ? alone_steps + 1 : 0;
        const int want = alone_steps > 2 ? options_.lone_threads : std::max(1, options_.threads);
        if (want != team) set_num_threads(team = want);
      }
      decode_step(batch);
    }
    in_batch_.store(batch.sentences(), std::memory_order_relaxed);
    metrics_.batch_state(name_, queued(), batch.sentences(), batch.rows());
  }
  if (busy && busy_loops) busy_loops->fetch_sub(1, std::memory_order_relaxed);
  // Stopping: every job not done ends here.
  for (auto& [handle, l] : live_) finish(l.job, Outcome::shut_down);
  live_.clear();
  std::deque<std::shared_ptr<Job>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(queue_);
    queued_sentences_ = 0;
  }
  for (auto& job : left) finish(job, Outcome::shut_down);
  metrics_.batch_state(name_, 0, 0, 0);
}

}  // namespace attn::serve
