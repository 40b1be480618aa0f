// python/src/compute.h — how a binding runs library code: the GIL released,
// the process's asynchronous signals kept off the computing threads, and
// Ctrl-C turned into KeyboardInterrupt between the steps of a long call.
//
// Why the signals: a handler runs on whichever thread the kernel picks, and
// Debian's oneDNN 2.6 JIT kernels point the stack pointer into heap memory
// while they run, so a signal frame pushed there corrupts the heap (the
// reason `attn` blocks SIGINT and SIGTERM in its computing threads; see
// apps/attn/signals.h). Python installs its own SIGINT handler, so a Ctrl-C
// landing on a thread inside a matrix product could crash the interpreter.
// While library code runs, the calling thread (and every OpenMP thread it
// forks, which inherit its mask) blocks the signals below; a signal that
// arrives meanwhile waits until the call returns, or, in a long call, is
// taken by a watcher thread that runs the process's handler for it there,
// where no JIT code runs.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace attn::python {

namespace py = pybind11;

// The thread count that attn.set_num_threads() set (or ATTN_NUM_THREADS, or
// OpenMP's default, read at import), applied to every Python thread that
// calls into the library: OpenMP keeps the setting per thread.
void set_thread_count(int n);
int thread_count();

// Blocks the asynchronous signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM,
// SIGVTALRM, SIGUSR1, SIGUSR2, SIGCHLD, SIGWINCH) in this thread for its
// lifetime, and once per thread in the OpenMP threads this thread forks.
class SignalBlock {
 public:
  SignalBlock();
  ~SignalBlock();
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;

 private:
  bool active_ = false;
};

// Thrown by InterruptWatch::check() inside library code (a hook between
// batches or steps) to end a long call early; finish() turns it into the
// Python exception.
struct Interrupted : std::exception {
  const char* what() const noexcept override { return "interrupted"; }
};

// For a long call made from Python's main thread: while it lives, a watcher
// thread takes the signals above from the process (signalfd) and runs their
// handlers (Python's, which only note the signal for later), or their
// default action; a SIGINT also sets interrupted(). check() — called by the
// library's hooks between batches or steps, on any thread — throws
// Interrupted once a SIGINT came, and on the calling thread also asks
// Python (GIL taken briefly) whether a signal arrived at another thread.
// Made from any other thread it does nothing: Python delivers signals to
// its main thread only.
class InterruptWatch {
 public:
  InterruptWatch();
  ~InterruptWatch();
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

  void check();
  bool interrupted() const;
  // With the GIL held, after the call: raise what Python's SIGINT handler
  // raised (when it ran, in check() or now), or KeyboardInterrupt; a
  // KeyboardInterrupt gets `message` when one is given.
  [[noreturn]] void raise_interrupt(const std::string& message = "");

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Runs fn() with the signals blocked and the GIL released; the result (a
// C++ value) is converted by the caller once the GIL is back.
template <class Fn>
auto compute(Fn&& fn) -> decltype(fn()) {
  SignalBlock block;
  py::gil_scoped_release release;
  return fn();
}

// compute() for a long call that stops at `watch.check()` points: an
// Interrupted from inside becomes KeyboardInterrupt (or what Python's
// SIGINT handler raises).
template <class Fn>
auto compute_interruptible(InterruptWatch& watch, Fn&& fn) -> decltype(fn()) {
  try {
    return compute(std::forward<Fn>(fn));
  } catch (const Interrupted&) {
    watch.raise_interrupt();
  }
}

}  // namespace attn::python
