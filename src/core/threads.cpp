#include "attn/core/threads.h"

#include <dirent.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/contention.h"

namespace attn {
namespace {

// Applies ATTN_NUM_THREADS once, so oneDNN sees the same setting.
struct ThreadsFromEnv {
  ThreadsFromEnv() {
    if (const char* s = std::getenv("ATTN_NUM_THREADS")) {
      char* end = nullptr;
      long n = std::strtol(s, &end, 10);
      if (end != s && *end == '\0' && n > 0 && n <= 1024) omp_set_num_threads(static_cast<int>(n));
    }
  }
};

// The number of runnable tasks on the machine (/proc/loadavg's fourth field,
// "running/total"), or -1 where it cannot be read.
int runnable_tasks() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return -1;
  double l1, l5, l15;
  int running = -1, total = 0;
  if (std::fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) != 5) running = -1;
  std::fclose(f);
  return running;
}

// The number of this process's threads that are running or runnable now
// (state R in /proc/self/task/*/stat), or -1.
int own_runnable_threads() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    char buf[512];
    const std::string path = std::string("/proc/self/task/") + e->d_name + "/stat";
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) continue;  // the thread has just ended
    const std::size_t len = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[len] = '\0';
    const char* paren = std::strrchr(buf, ')');  // the name may hold spaces and ')'
    if (paren != nullptr && paren[1] == ' ' && paren[2] == 'R') ++n;
  }
  closedir(dir);
  return n;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Contention {
  std::atomic<std::int64_t> next_sample_ns{0};
  std::atomic<bool> busy{false};  // filter.busy(), for the threads that do not sample
  std::atomic<std::int64_t> probed_scale{1};  // grain_scale_for_trip of the last probe
  std::atomic<std::int64_t> probes{0}, far_probes{0};  // probes that measured; far ones
  std::atomic_flag sampling = ATOMIC_FLAG_INIT;  // one sampler at a time owns `filter`
  std::int64_t next_probe_ns = 0;  // owned by the sampler
  detail::ContentionFilter filter;
  const int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  const bool avx512 = __builtin_cpu_supports("avx512f") != 0;
  std::atomic<bool> enabled{[] {
    const char* s = std::getenv("ATTN_ADAPTIVE_THREADS");
    return s == nullptr || std::strcmp(s, "0") != 0;
  }()};
  std::atomic<std::int64_t> forced_scale{
      detail::parse_grain_scale(std::getenv("ATTN_GRAIN_SCALE"))};

  // Others' runnable tasks and attn's team outnumber the cores: busy. The
  // state follows the samples as core/contention.h describes. While not
  // busy, and at most every kProbeEveryNs, the team's round trip is probed
  // (from outside any parallel region, with a team to probe).
  void sample(std::int64_t now) {
    if (sampling.test_and_set(std::memory_order_acquire)) return;
    const int running = runnable_tasks(), own = own_runnable_threads();
    if (running >= 0 && own >= 0 && cores > 0) {
      const int others = std::max(0, running - own);
      filter.observe(others + omp_get_max_threads() > cores, now);
      busy.store(filter.busy(), std::memory_order_relaxed);
    }
    const int threads = omp_get_max_threads();
    if (now >= next_probe_ns && !filter.busy() && threads > 1 && !omp_in_parallel()) {
      const std::int64_t trip = detail::team_round_trip_ns(threads);
      if (trip >= 0) {
        probed_scale.store(detail::grain_scale_for_trip(trip, avx512), std::memory_order_relaxed);
        probes.fetch_add(1, std::memory_order_relaxed);
        if (trip > kFarRoundTripNs) far_probes.fetch_add(1, std::memory_order_release);
      }
      next_probe_ns = now + (trip >= 0 ? kProbeEveryNs : kProbeEveryNs / 10);  // unmeasured: soon
    }
    sampling.clear(std::memory_order_release);
  }

  // Samples when the last sample is 20 ms old (one caller at a time).
  void maybe_sample() {
    const std::int64_t now = now_ns();
    std::int64_t next = next_sample_ns.load(std::memory_order_relaxed);
    if (now >= next &&
        next_sample_ns.compare_exchange_strong(next, now + 20'000'000, std::memory_order_relaxed))
      sample(now);
  }
};

Contention& contention() {
  static Contention c;
  return c;
}

}  // namespace

bool fork_ok() {
  Contention& c = contention();
  if (!c.enabled.load(std::memory_order_relaxed)) return true;
  c.maybe_sample();
  return !c.busy.load(std::memory_order_relaxed);
}

std::int64_t grain_scale() {
  Contention& c = contention();
  const std::int64_t forced = c.forced_scale.load(std::memory_order_relaxed);
  if (forced > 0) return forced;
  if (!c.enabled.load(std::memory_order_relaxed)) return 1;
  c.maybe_sample();
  return c.probed_scale.load(std::memory_order_relaxed);
}

PlacementProbes placement_probes() {
  Contention& c = contention();
  PlacementProbes p;
  p.far = c.far_probes.load(std::memory_order_acquire);  // first: never above probes
  p.probes = c.probes.load(std::memory_order_relaxed);
  return p;
}

namespace detail {

std::int64_t set_grain_scale(std::int64_t scale) {
  return contention().forced_scale.exchange(scale);
}

bool set_adaptive_threads(bool on) { return contention().enabled.exchange(on); }

std::int64_t grain_scale_for_trip(std::int64_t trip_ns, bool avx512) {
  return trip_ns > (avx512 ? kFarRoundTripNs : kFarRoundTripNsNoAvx512) ? kFarGrainScale : 1;
}

std::int64_t parse_grain_scale(const char* s) {
  if (s == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(s, &end, 10);
  return end != s && *end == '\0' && n >= 1 && n <= 1024 ? n : 0;
}

std::int64_t team_round_trip_ns(int threads, std::int64_t budget_ns) {
  if (threads < 2 || omp_in_parallel()) return -1;
  std::atomic<std::int64_t> ball{0};
  std::atomic<int> turn{1};  // the thread playing with thread 0
  std::atomic<bool> gave_up{false};
  std::int64_t worst = -1;  // thread 0's
  int team = 1;
  const std::int64_t start = now_ns();
  // Spins until ready(); false once the probe has gone on for its budget.
  auto wait_for = [&](auto&& ready) {
    for (int spins = 1; !ready(); ++spins) {
      if (gave_up.load(std::memory_order_relaxed)) return false;
      if (spins % 64 == 0 && now_ns() - start > budget_ns) {
        gave_up.store(true, std::memory_order_relaxed);
        return false;
      }
    }
    return true;
  };
#pragma omp parallel num_threads(threads)
  {
    const int me = omp_get_thread_num(), n = omp_get_num_threads();
    if (me == 0) team = n;
    for (int t = 1; t < n; ++t) {
      if (me == 0) {
        std::array<std::int64_t, kProbeTrips> trips{};
        std::int64_t done = 0;
        for (; done < kProbeTrips; ++done) {
          const std::int64_t t0 = now_ns();
          ball.store(2 * done + 1, std::memory_order_release);
          if (!wait_for([&] { return ball.load(std::memory_order_acquire) == 2 * done + 2; }))
            break;
          trips[static_cast<std::size_t>(done)] = now_ns() - t0;
        }
        if (done == kProbeTrips) {  // the median: a trip may be cut short or delayed
          std::nth_element(trips.begin(), trips.begin() + kProbeTrips / 2, trips.end());
          worst = std::max(worst, trips[kProbeTrips / 2]);
        }
        ball.store(0, std::memory_order_relaxed);
        turn.store(t + 1, std::memory_order_release);
      } else if (me == t) {
        for (std::int64_t k = 0; k < kProbeTrips; ++k) {
          if (!wait_for([&] { return ball.load(std::memory_order_acquire) == 2 * k + 1; })) break;
          ball.store(2 * k + 2, std::memory_order_release);
        }
      }
      if (!wait_for([&] { return turn.load(std::memory_order_acquire) > t; })) break;
    }
  }
  return gave_up.load() || team < 2 ? -1 : worst;
}

}  // namespace detail

void init_threads_from_env() { static ThreadsFromEnv once; }

void set_num_threads(int n) {
  init_threads_from_env();
  if (n > 0) omp_set_num_threads(n);
}

int get_num_threads() {
  init_threads_from_env();
  return omp_get_max_threads();
}

}  // namespace attn
