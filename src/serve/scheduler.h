// src/serve/scheduler.h — internal: one model's decoding loop, the only
// owner of its continuous batch (seq2seq::DecodingBatch).
//
// Requests hand it jobs (their sentences, already tokenized); the loop, on a
// thread of its own, admits sentences in the order they came (FIFO across
// all connections) into the batch as long as the batch's budgets allow,
// runs one decoding step, hands finished sentences back, and
// repeats: a request's sentences join at the next step and leave when done
// (iteration-level scheduling). A sentence's cost is what its caches may
// hold: beam_size x (source length + its length limit) tokens; its rows
// (its beam size) count against a second budget (SchedulerOptions::
// max_batch_size). The head of the queue waits until both fit (nothing
// overtakes it, so no request starves); one larger than the whole budget
// runs alone. A job past its deadline, or cancelled (its client left), is
// dropped from the queue and the batch at the next step, freeing its rows.
//
// The loop runs in the precision the server was given, with the model's
// parameters frozen (ops/precision.h), so every sentence gets the same bits
// as `attn translate` gives it, whatever shares its steps.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "attn/ops/precision.h"
#include "attn/seq2seq/decode.h"
#include "attn/seq2seq/model_dir.h"
#include "serve/metrics.h"

namespace attn::serve {

enum class Outcome {
  done,  // every sentence decoded
  timed_out,  // past its deadline
  cancelled,  // its client left
  failed,  // the decoding raised an error (message in Job::error)
  shut_down,  // the server stopped before it was done
};

// One request's sentences for one model.
struct Job {
  using Clock = std::chrono::steady_clock;
  struct Sentence {
    std::string text;  // as the client wrote it (for the attention's JSON)
    std::vector<std::int64_t> ids;  // the source ids, <eos> included
  };
  std::vector<Sentence> sentences;
  seq2seq::DecodeOptions options;
  bool attention = false;  // also each sentence's best hypothesis's attention maps (JSON)
  Clock::time_point deadline = Clock::time_point::max();
  // Called once, on the decoding thread, when the job ends (any outcome).
  std::function<void(Outcome)> on_done;

  // Filled by the decoding thread: per sentence its n-best list, and with
  // `attention` the JSON of seq2seq::attention_maps_json.
  std::vector<std::vector<seq2seq::Hypothesis>> hypotheses;
  std::vector<std::string> attention_json;
  std::string error;

  // From any thread: the client left; the job ends at the next step.
  void cancel() { cancelled.store(true); }
  std::atomic<bool> cancelled{false};

  // The decoding thread's bookkeeping.
  std::size_t admitted = 0, finished = 0;
  bool ended = false;
};

struct SchedulerOptions {
  int threads = 0;  // for the decoding's ops; 0: attn's default
  // Once no other loop of the server has had work for three of this
  // loop's steps: this many threads (0: no more than `threads`), so that
  // one sentence alone decodes on the cores the idle loops leave. Counted
  // in `busy_loops`, shared by the server's loops (each counts itself
  // while it has sentences queued or decoding).
  int lone_threads = 0;
  std::shared_ptr<std::atomic<int>> busy_loops;
  Precision precision = Precision::f32;
  bool int8 = false;  // Linear weights in int8 (ops/quantize.h)
  std::int64_t max_batch_tokens = 16384;  // the batch's budget of cached tokens
  // Sentences of a beam size b decoded together: b x this many rows at most;
  // 0: b x seq2seq::automatic_batch_size(b) rows, the batch of attn
  // translate (64 rows in int8 or bf16, whose products are as fast on few
  // rows, and whose caches then stay in the CPU's).
  std::int64_t max_batch_size = 0;
  std::int64_t max_queue = 1024;  // sentences waiting, at most
};

class Scheduler {
 public:
  // `model` must outlive the scheduler; its thread starts here.
  Scheduler(std::string name, seq2seq::LoadedModel& model, SchedulerOptions options,
            Metrics& metrics);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues the job; false (nothing queued) when the queue would then hold
  // more than max_queue sentences, or the scheduler is stopping.
  bool submit(std::shared_ptr<Job> job);
  // Wakes the loop (after a Job::cancel, so that it frees the job's rows now).
  void wake();
  // Ends every job not done yet (Outcome::shut_down) and the thread.
  void stop();
  // Sentences waiting to join the batch.
  std::int64_t queued() const;
  // Sentences waiting or in the batch (for choosing among a model's loops).
  std::int64_t load() const { return queued() + in_batch_.load(std::memory_order_relaxed); }

  // The tokens a sentence of `source_length` ids may cache, decoded with
  // `options` by this model (the cost that admission counts).
  std::int64_t cost(std::int64_t source_length, const seq2seq::DecodeOptions& options) const;

 private:
  void run();
  void admit(seq2seq::DecodingBatch& batch);
  void drop_ended(seq2seq::DecodingBatch& batch);
  void finish(const std::shared_ptr<Job>& job, Outcome outcome);
  void decode_step(seq2seq::DecodingBatch& batch);
  // The rows a batch may hold when a sentence of `beam_size` joins it.
  std::int64_t max_rows(std::int64_t beam_size) const;

  struct Live {
    std::shared_ptr<Job> job;
    std::size_t index;
    std::int64_t cost;
    std::int64_t rows;  // its beam size
  };

  std::string name_;
  seq2seq::LoadedModel& model_;
  SchedulerOptions options_;
  Metrics& metrics_;
  std::int64_t bos_ = 0, eos_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;  // jobs with sentences not yet admitted
  std::int64_t queued_sentences_ = 0;
  bool stopping_ = false;

  // The decoding thread's own.
  std::vector<std::pair<seq2seq::DecodingBatch::Handle, Live>> live_;
  std::int64_t used_tokens_ = 0, used_rows_ = 0;
  std::atomic<std::int64_t> in_batch_{0};
  std::thread thread_;
};

}  // namespace attn::serve
