// The server's metrics (src/serve/metrics.h).
#include "serve/metrics.h"

#include <fmt/format.h>

namespace attn::serve {

namespace {

constexpr std::chrono::seconds kRateWindow{10};

const char* const kRoutes[] = {"/",       "/translate",         "/languages", "/detect",
                               "/health", "/frontend/settings", "/metrics",   "/attention"};

// A number as Prometheus reads it.
std::string number(double v) { return fmt::format("{}", v); }

}  // namespace

std::string route_label(const std::string& path) {
  for (const char* r : kRoutes)
    if (path == r) return r;
  return "other";
}

const std::vector<double>& Metrics::latency_buckets() {
  static const std::vector<double> b = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                        0.5,   1,    2.5,   5,    10,  30};
  return b;
}

const std::vector<double>& Metrics::row_buckets() {
  static const std::vector<double> b = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  return b;
}

void Metrics::observe(Histogram& h, const std::vector<double>& bounds, double value) {
  if (h.counts.empty()) h.counts.assign(bounds.size() + 1, 0);
  std::size_t i = 0;
  while (i < bounds.size() && value > bounds[i]) ++i;
  ++h.counts[i];
  h.sum += value;
  ++h.count;
}

void Metrics::request_done(const std::string& route, int status, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, status}];
  observe(latency_[route], latency_buckets(), seconds);
}

void Metrics::step_done(std::int64_t rows, std::int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  observe(rows_, row_buckets(), static_cast<double>(rows));
  tokens_ += static_cast<std::uint64_t>(tokens);
  const auto now = std::chrono::steady_clock::now();
  recent_.emplace_back(now, tokens);
  while (!recent_.empty() && now - recent_.front().first > kRateWindow) recent_.pop_front();
}

void Metrics::batch_state(const std::string& model, std::int64_t queued, std::int64_t sentences,
                          std::int64_t rows) {
  std::lock_guard<std::mutex> lock(mu_);
  batches_[model] = {queued, sentences, rows};
}

void Metrics::sentences_dropped(const std::string& reason, std::int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  dropped_[reason] += static_cast<std::uint64_t>(n);
}

void Metrics::connections(std::int64_t open) {
  std::lock_guard<std::mutex> lock(mu_);
  connections_ = open;
}

void Metrics::connection_refused() {
  std::lock_guard<std::mutex> lock(mu_);
  ++refused_;
}

double Metrics::tokens_per_second() const {
  const auto now = std::chrono::steady_clock::now();
  std::int64_t n = 0;
  for (const auto& [when, tokens] : recent_)
    if (now - when <= kRateWindow) n += tokens;
  return static_cast<double>(n) / std::chrono::duration<double>(kRateWindow).count();
}

void Metrics::render_histogram(std::string& out, const std::string& name, const std::string& labels,
                               const Histogram& h, const std::vector<double>& bounds) {
  const std::string sep = labels.empty() ? "" : ",";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    cumulative += h.counts.empty() ? 0 : h.counts[i];
    out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, number(bounds[i]),
                       cumulative);
  }
  out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, sep, h.count);
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces, number(h.sum), name, braces,
                     h.count);
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out += "# HELP attn_http_requests_total HTTP requests answered, by route and status.\n";
  out += "# TYPE attn_http_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out += fmt::format("attn_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first,
                       key.second, n);
  out +=
      "# HELP attn_http_request_duration_seconds Time from a request's last byte to its "
      "answer.\n";
  out += "# TYPE attn_http_request_duration_seconds histogram\n";
  for (const auto& [route, h] : latency_)
    render_histogram(out, "attn_http_request_duration_seconds", fmt::format("route=\"{}\"", route),
                     h, latency_buckets());
  std::int64_t queued = 0, sentences = 0, rows = 0;
  for (const auto& [model, b] : batches_) {
    queued += b[0];
    sentences += b[1];
    rows += b[2];
  }
  out += "# HELP attn_queue_sentences Sentences waiting to join a decoding batch.\n";
  out += "# TYPE attn_queue_sentences gauge\n";
  out += fmt::format("attn_queue_sentences {}\n", queued);
  out += "# HELP attn_batch_sentences Sentences in the decoding batches.\n";
  out += "# TYPE attn_batch_sentences gauge\n";
  out += fmt::format("attn_batch_sentences {}\n", sentences);
  out += "# HELP attn_batch_rows Rows (live hypotheses) in the decoding batches.\n";
  out += "# TYPE attn_batch_rows gauge\n";
  out += fmt::format("attn_batch_rows {}\n", rows);
  out += "# HELP attn_batch_rows_per_step Rows fed by each decoding step.\n";
  out += "# TYPE attn_batch_rows_per_step histogram\n";
  render_histogram(out, "attn_batch_rows_per_step", "", rows_, row_buckets());
  out += "# HELP attn_generated_tokens_total Tokens produced by the decoding steps.\n";
  out += "# TYPE attn_generated_tokens_total counter\n";
  out += fmt::format("attn_generated_tokens_total {}\n", tokens_);
  out +=
      "# HELP attn_generated_tokens_per_second Tokens produced per second, over the last "
      "10 s.\n";
  out += "# TYPE attn_generated_tokens_per_second gauge\n";
  out += fmt::format("attn_generated_tokens_per_second {}\n", number(tokens_per_second()));
  out +=
      "# HELP attn_sentences_dropped_total Sentences of requests that ended before they were "
      "decoded, by reason.\n";
  out += "# TYPE attn_sentences_dropped_total counter\n";
  for (const char* reason : {"cancelled", "timed_out", "failed", "shut_down"}) {
    auto it = dropped_.find(reason);
    out += fmt::format("attn_sentences_dropped_total{{reason=\"{}\"}} {}\n", reason,
                       it == dropped_.end() ? 0 : it->second);
  }
  out += "# HELP attn_connections Open client connections.\n";
  out += "# TYPE attn_connections gauge\n";
  out += fmt::format("attn_connections {}\n", connections_);
  out += "# HELP attn_connections_refused_total Connections refused at the connection limit.\n";
  out += "# TYPE attn_connections_refused_total counter\n";
  out += fmt::format("attn_connections_refused_total {}\n", refused_);
  return out;
}

}  // namespace attn::serve
