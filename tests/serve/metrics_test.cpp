// The server's metrics in the Prometheus text format (src/serve/metrics.h)
// and its per-client request limit (src/serve/limits.h).
#include "serve/metrics.h"

#include "serve/limits.h"
#include "testing.h"

using namespace attn::serve;

namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

}  // namespace

TEST(Metrics, PrometheusText) {
  Metrics m;
  m.request_done("/translate", 200, 0.02);
  m.request_done("/translate", 200, 0.3);
  m.request_done("/translate", 400, 0.001);
  m.step_done(5, 5);
  m.step_done(40, 40);
  m.batch_state("en-fr", 3, 7, 20);
  m.sentences_dropped("cancelled", 4);
  m.connections(12);
  m.connection_refused();
  const std::string t = m.render();
  EXPECT_TRUE(has_line(t, "attn_http_requests_total{route=\"/translate\",status=\"200\"} 2"));
  EXPECT_TRUE(has_line(t, "attn_http_requests_total{route=\"/translate\",status=\"400\"} 1"));
  // Cumulative buckets: 0.001 and 0.02 are <= 0.025, all three <= 0.5.
  EXPECT_TRUE(has_line(
      t, "attn_http_request_duration_seconds_bucket{route=\"/translate\",le=\"0.025\"} 2"));
  EXPECT_TRUE(
      has_line(t, "attn_http_request_duration_seconds_bucket{route=\"/translate\",le=\"0.5\"} 3"));
  EXPECT_TRUE(has_line(t, "attn_http_request_duration_seconds_count{route=\"/translate\"} 3"));
  EXPECT_TRUE(has_line(t, "attn_batch_rows_per_step_bucket{le=\"8\"} 1"));
  EXPECT_TRUE(has_line(t, "attn_batch_rows_per_step_bucket{le=\"+Inf\"} 2"));
  EXPECT_TRUE(has_line(t, "attn_batch_rows_per_step_sum 45"));
  EXPECT_TRUE(has_line(t, "attn_queue_sentences 3"));
  EXPECT_TRUE(has_line(t, "attn_batch_sentences 7"));
  EXPECT_TRUE(has_line(t, "attn_batch_rows 20"));
  EXPECT_TRUE(has_line(t, "attn_generated_tokens_total 45"));
  EXPECT_TRUE(has_line(t, "attn_generated_tokens_per_second 4.5"));  // 45 tokens / 10 s
  EXPECT_TRUE(has_line(t, "attn_sentences_dropped_total{reason=\"cancelled\"} 4"));
  EXPECT_TRUE(has_line(t, "attn_sentences_dropped_total{reason=\"timed_out\"} 0"));
  EXPECT_TRUE(has_line(t, "attn_connections 12"));
  EXPECT_TRUE(has_line(t, "attn_connections_refused_total 1"));
  // Every sample line is NAME{labels} VALUE or NAME VALUE; each family has HELP and TYPE.
  std::istringstream lines(t);
  std::string line;
  int types = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("# TYPE ", 0) == 0) ++types;
    if (line.empty() || line[0] == '#') continue;
    EXPECT_NE(line.find(' '), std::string::npos) << line;
    EXPECT_EQ(line.rfind("attn_", 0), 0u) << line;
  }
  EXPECT_EQ(types, 11);
  EXPECT_EQ(route_label("/translate"), "/translate");
  EXPECT_EQ(route_label("/../etc/passwd"), "other");
}

TEST(RateLimiter, SlidingMinutePerClient) {
  using Clock = RateLimiter::Clock;
  RateLimiter limit(3);
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limit.admit("a", t0 + std::chrono::seconds(i)), 0);
  // The fourth within the minute waits until the first is a minute old.
  EXPECT_EQ(limit.admit("a", t0 + std::chrono::seconds(10)), 50);
  EXPECT_EQ(limit.admit("b", t0 + std::chrono::seconds(10)), 0);  // another client
  EXPECT_EQ(limit.admit("a", t0 + std::chrono::seconds(60)), 0);
  EXPECT_EQ(limit.admit("a", t0 + std::chrono::milliseconds(60500)), 1);  // at least 1 s
  RateLimiter none(0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(none.admit("a", t0), 0);
  EXPECT_FALSE(none.enabled());
}
