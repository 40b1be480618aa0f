// Per-client limits and API keys (src/serve/limits.h).
#include "serve/limits.h"

#include <cmath>

#include "attn/core/error.h"
#include "attn/data/text.h"
#include "attn/io/read_file.h"
#include "attn/serve/server.h"

namespace attn::serve {

namespace {
constexpr std::chrono::seconds kWindow{60};
// Every this many calls, clients idle for a whole window are dropped.
constexpr std::uint64_t kSweepEvery = 1024;
}  // namespace

int RateLimiter::admit(const std::string& client, Clock::time_point now) {
  if (per_minute_ <= 0) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (++calls_ % kSweepEvery == 0) {
    for (auto it = seen_.begin(); it != seen_.end();) {
      if (it->second.empty() || now - it->second.back() >= kWindow)
        it = seen_.erase(it);
      else
        ++it;
    }
  }
  std::deque<Clock::time_point>& times = seen_[client];
  while (!times.empty() && now - times.front() >= kWindow) times.pop_front();
  if (static_cast<std::int64_t>(times.size()) < per_minute_) {
    times.push_back(now);
    return 0;
  }
  const double wait = std::chrono::duration<double>(times.front() + kWindow - now).count();
  return std::max(1, static_cast<int>(std::ceil(wait)));
}

std::set<std::string> read_api_keys(const std::string& path) {
  const std::string text = io::read_file_bytes(path, std::uint64_t{1} << 24);
  data::check_utf8(text, "'" + path + "'");
  std::set<std::string> keys;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::size_t last = line.find_last_not_of(" \t\r");
    keys.insert(line.substr(first, last - first + 1));
  }
  ATTN_CHECK(!keys.empty(), IOError, "'{}' holds no API key (one per line; # starts a comment)",
             path);
  return keys;
}

}  // namespace attn::serve
