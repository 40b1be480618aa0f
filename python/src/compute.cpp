#include "compute.h"

#include <omp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>

#include "attn/core/error.h"
#include "attn/core/threads.h"

namespace attn::python {
namespace {

std::atomic<int> g_threads{0};  // 0: not set yet (import sets it)

sigset_t async_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig :
       {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGVTALRM, SIGUSR1, SIGUSR2, SIGCHLD, SIGWINCH})
    sigaddset(&set, sig);
  return set;
}

// Per Python thread: how many threads of its OpenMP pool have the signals
// blocked (a pool made before, e.g. by PyTorch, did not inherit the mask).
thread_local int t_pool_masked = 0;

void mask_pool(int threads) {
  if (threads <= t_pool_masked) return;
  const sigset_t set = async_signals();
#pragma omp parallel num_threads(threads)
  { pthread_sigmask(SIG_BLOCK, &set, nullptr); }
  t_pool_masked = threads;
}

// Whether `sig`'s default action leaves the process running.
bool ignored_by_default(int sig) { return sig == SIGCHLD || sig == SIGWINCH; }

// Does for `sig` (taken from the process by the watcher) what the kernel
// would have done had it delivered it to this thread: nothing when ignored,
// the default action (the process ends) when that is what is set, else the
// handler, here. Returns whether a handler ran.
bool deliver(const signalfd_siginfo& fdsi) {
  const int sig = static_cast<int>(fdsi.ssi_signo);
  struct sigaction sa;
  if (sigaction(sig, nullptr, &sa) != 0 || sa.sa_handler == SIG_IGN) return false;
  if (sa.sa_handler == SIG_DFL) {
    if (ignored_by_default(sig)) return false;
    ::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(sig);
    ::_exit(128 + sig);  // not reached
  }
  if ((sa.sa_flags & SA_SIGINFO) != 0) {
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    info.si_signo = sig;
    info.si_code = fdsi.ssi_code;
    info.si_pid = static_cast<pid_t>(fdsi.ssi_pid);
    info.si_uid = static_cast<uid_t>(fdsi.ssi_uid);
    sa.sa_sigaction(sig, &info, nullptr);
  } else {
    sa.sa_handler(sig);
  }
  return true;
}

unsigned long python_main_thread() {
  static const unsigned long ident = [] {
    py::gil_scoped_acquire gil;
    return py::module_::import("threading")
        .attr("main_thread")()
        .attr("ident")
        .cast<unsigned long>();
  }();
  return ident;
}

}  // namespace

void set_thread_count(int n) {
  ATTN_CHECK(n >= 1 && n <= 1024, ValueError, "set_num_threads: expected 1 to 1024 threads, got {}",
             n);
  g_threads.store(n);
  attn::set_num_threads(n);
}

int thread_count() {
  int n = g_threads.load();
  if (n == 0) {
    n = attn::get_num_threads();  // ATTN_NUM_THREADS, else OpenMP's default
    g_threads.store(n);
  }
  return n;
}

SignalBlock::SignalBlock() {
  const sigset_t set = async_signals();
  active_ = pthread_sigmask(SIG_BLOCK, &set, nullptr) == 0;
  const int n = thread_count();
  if (omp_get_max_threads() != n) attn::set_num_threads(n);
  mask_pool(n);
}

SignalBlock::~SignalBlock() {
  if (!active_) return;
  const sigset_t set = async_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

struct InterruptWatch::State {
  bool enabled = false;
  std::thread::id caller;
  int sfd = -1, efd = -1;
  std::thread watcher;
  std::atomic<bool> sigint{false};  // the watcher took a SIGINT
  std::atomic<bool> stopped{false};  // check() has thrown
  py::object error_type, error_value, error_trace;  // what Python's handler raised

  void watch() {
    pollfd fds[2] = {{sfd, POLLIN, 0}, {efd, POLLIN, 0}};
    for (;;) {
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if ((fds[1].revents & POLLIN) != 0) return;
      if ((fds[0].revents & POLLIN) == 0) continue;
      signalfd_siginfo info;
      if (::read(sfd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
      if (deliver(info) && info.ssi_signo == SIGINT) sigint.store(true);
    }
  }
};

InterruptWatch::InterruptWatch() : state_(std::make_shared<State>()) {
  State& s = *state_;
  if (PyThread_get_thread_ident() != python_main_thread()) return;
  const sigset_t set = async_signals();
  s.sfd = signalfd(-1, &set, SFD_CLOEXEC);
  s.efd = eventfd(0, EFD_CLOEXEC);
  ATTN_CHECK(s.sfd >= 0 && s.efd >= 0, Error, "attn: cannot watch for Ctrl-C: {}",
             std::strerror(errno));
  // The watcher must never take a signal by a handler of its own: it is
  // made with every watched signal blocked (it inherits the mask).
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &set, &old);
  s.watcher = std::thread([st = state_] { st->watch(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  s.caller = std::this_thread::get_id();
  s.enabled = true;
}

InterruptWatch::~InterruptWatch() {
  State& s = *state_;
  if (s.watcher.joinable()) {
    const std::uint64_t one = 1;
    ssize_t ignored = ::write(s.efd, &one, sizeof one);
    (void)ignored;
    s.watcher.join();
  }
  if (s.sfd >= 0) ::close(s.sfd);
  if (s.efd >= 0) ::close(s.efd);
}

void InterruptWatch::check() {
  State& s = *state_;
  if (!s.enabled) return;
  if (s.sigint.load() || s.stopped.load()) {
    s.stopped.store(true);
    throw Interrupted();
  }
  if (std::this_thread::get_id() != s.caller) return;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() == 0) return;
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  s.error_type = py::reinterpret_steal<py::object>(type);
  s.error_value = py::reinterpret_steal<py::object>(value);
  s.error_trace = py::reinterpret_steal<py::object>(trace);
  s.stopped.store(true);
  throw Interrupted();
}

bool InterruptWatch::interrupted() const { return state_->stopped.load(); }

void InterruptWatch::raise_interrupt(const std::string& message) {
  State& s = *state_;
  if (!s.error_type && PyErr_CheckSignals() != 0) {  // the watcher ran Python's handler
    PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
    PyErr_Fetch(&type, &value, &trace);
    s.error_type = py::reinterpret_steal<py::object>(type);
    s.error_value = py::reinterpret_steal<py::object>(value);
    s.error_trace = py::reinterpret_steal<py::object>(trace);
  }
  const bool keyboard =
      !s.error_type || PyErr_GivenExceptionMatches(s.error_type.ptr(), PyExc_KeyboardInterrupt);
  if (s.error_type && !(keyboard && !message.empty())) {
    PyErr_Restore(s.error_type.release().ptr(), s.error_value.release().ptr(),
                  s.error_trace.release().ptr());
    throw py::error_already_set();
  }
  s.error_type = s.error_value = s.error_trace = py::object();
  if (message.empty())
    PyErr_SetNone(PyExc_KeyboardInterrupt);
  else
    PyErr_SetString(PyExc_KeyboardInterrupt, message.c_str());
  throw py::error_already_set();
}

}  // namespace attn::python
