#include "signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "attn/core/error.h"

namespace attn::cli {
namespace {

// -1: no StopScope; 0: inside one, no signal yet; > 0: the signal that
// asked to stop inside it. One atomic, so that a signal racing with the end
// of the scope is either seen by the scope's owner or ends the process.
std::atomic<int> g_mode{-1};
std::atomic<int> g_last{0};  // what the last scope received (stop_signal())
constexpr const char* kAgain = "\nattn: interrupted again; exiting without a new checkpoint\n";
std::atomic<const char*> g_again{kAgain};  // the current scope's line for a second signal

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
    int mode = 0;
    if (g_mode.compare_exchange_strong(mode, sig)) continue;  // the first: stop after the step
    if (mode > 0) {
      say(g_again.load());
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

StopScope::StopScope(const char* again) {
  g_again.store(again != nullptr ? again : kAgain);
  g_last.store(0);
  g_mode.store(0);
}

StopScope::~StopScope() { g_last.store(std::max(0, g_mode.exchange(-1))); }

int stop_signal() {
  const int mode = g_mode.load();
  return mode >= 0 ? mode : g_last.load();
}

void end_by_signal(int sig) { die_by(sig); }

}  // namespace attn::cli
