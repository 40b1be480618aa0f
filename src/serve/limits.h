// src/serve/limits.h — internal: per-client request limits (--req-limit)
// and API keys (--api-keys).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

namespace attn::serve {

// At most `per_minute` requests per client in any 60 seconds (a sliding
// window of the client's request times). Thread-safe. Clients idle for a
// minute are forgotten, so that the table holds only the last minute's.
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimiter(std::int64_t per_minute) : per_minute_(per_minute) {}
  // 0 when the request may go (it is counted); otherwise the whole seconds
  // until the client may send one more (for Retry-After), at least 1.
  int admit(const std::string& client, Clock::time_point now = Clock::now());
  bool enabled() const { return per_minute_ > 0; }

 private:
  std::int64_t per_minute_;
  std::mutex mu_;
  std::unordered_map<std::string, std::deque<Clock::time_point>> seen_;
  std::uint64_t calls_ = 0;
};

}  // namespace attn::serve
