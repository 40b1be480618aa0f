#include "signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "attn/core/error.h"

namespace attn::cli {
namespace {

std::atomic<bool> g_cooperative{false};
std::atomic<int> g_stop{0};

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void say(const char* msg) {
  ssize_t ignored = ::write(STDERR_FILENO, msg, std::strlen(msg));
  (void)ignored;
}

// Ends the process as `sig`'s default action would: unblocked in this thread
// alone, with the default disposition, and raised at this thread.
[[noreturn]] void die_by(int sig) {
  ::signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);  // not reached
}

void receive_signals() {
  const sigset_t set = stop_signals();
  for (;;) {
    int sig = 0;
    if (::sigwait(&set, &sig) != 0) continue;
    if (g_cooperative.load()) {
      int none = 0;
      if (g_stop.compare_exchange_strong(none, sig)) continue;  // the first: stop after the step
      say("\nattn: interrupted again; exiting without a new checkpoint\n");
      ::_exit(128 + sig);
    }
    die_by(sig);
  }
}

}  // namespace

void start_signal_thread() {
  const sigset_t set = stop_signals();
  int err = ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ATTN_CHECK(err == 0, InternalError, "start_signal_thread: pthread_sigmask failed: {}",
             std::strerror(err));
  std::thread(receive_signals).detach();
}

StopScope::StopScope() {
  g_stop.store(0);
  g_cooperative.store(true);
}

StopScope::~StopScope() { g_cooperative.store(false); }

int stop_signal() { return g_stop.load(); }

}  // namespace attn::cli
