// apps/attn/rss.h — the process's peak resident set size, for the metrics the
// commands print.
#pragma once

#include <sys/resource.h>

namespace attn::cli {

// Peak RSS of this process so far, in MiB (ru_maxrss is in KiB on Linux).
inline double peak_rss_mib() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

}  // namespace attn::cli
