// src/serve/metrics.h — internal: the server's counters, rendered in the
// Prometheus text format (version 0.0.4) for GET /metrics.
//
//   attn_http_requests_total{route,status}      counter
//   attn_http_request_duration_seconds{route}   histogram
//   attn_queue_sentences                        gauge: sentences waiting to join a batch
//   attn_batch_sentences / attn_batch_rows      gauges: in the decoding batch now
//   attn_batch_rows_per_step                    histogram: rows each decoding step fed
//   attn_generated_tokens_total                 counter: tokens the steps produced
//   attn_generated_tokens_per_second            gauge: over the last 10 s
//   attn_sentences_dropped_total{reason}        counter: left undecoded (cancelled: the
//                                               client left; timed_out; failed; shut_down)
//   attn_connections                            gauge: open connections
//   attn_connections_refused_total              counter: refused at the connection limit
// Every method is thread-safe (one mutex: a few updates per request and per
// decoding step).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace attn::serve {

// The route label of a request path: one of the routes the server has, or
// "other" (so that clients cannot grow the label set).
std::string route_label(const std::string& path);

class Metrics {
 public:
  void request_done(const std::string& route, int status, double seconds);
  // A decoding step of `rows` rows that produced `tokens` tokens.
  void step_done(std::int64_t rows, std::int64_t tokens);
  // The state of one model's batch and queue (summed over models when shown).
  void batch_state(const std::string& model, std::int64_t queued, std::int64_t sentences,
                   std::int64_t rows);
  // `n` sentences of a request that ended before they were decoded.
  void sentences_dropped(const std::string& reason, std::int64_t n);
  void connections(std::int64_t open);
  void connection_refused();
  std::string render() const;

  // Histogram bucket bounds (upper, inclusive), exposed for tests.
  static const std::vector<double>& latency_buckets();
  static const std::vector<double>& row_buckets();

 private:
  struct Histogram {
    std::vector<std::uint64_t> counts;  // per bucket, then +Inf
    double sum = 0;
    std::uint64_t count = 0;
  };
  static void observe(Histogram& h, const std::vector<double>& bounds, double value);
  static void render_histogram(std::string& out, const std::string& name, const std::string& labels,
                               const Histogram& h, const std::vector<double>& bounds);
  double tokens_per_second() const;  // mu_ held

  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::map<std::string, Histogram> latency_;
  Histogram rows_;
  std::uint64_t tokens_ = 0;
  // (time, tokens) of the last 10 s of steps, for the rate.
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::int64_t>> recent_;
  std::map<std::string, std::array<std::int64_t, 3>> batches_;  // queued, sentences, rows
  std::map<std::string, std::uint64_t> dropped_;
  std::int64_t connections_ = 0;
  std::uint64_t refused_ = 0;
};

}  // namespace attn::serve
