// apps/attn/signals.h — SIGINT and SIGTERM, received by one thread of their own.
//
// Why not a handler: a handler runs on whichever thread the kernel picks, and
// Debian's oneDNN 2.6 JIT kernels point the stack pointer into a heap buffer
// while they run; a signal frame pushed there overwrites the heap (measured:
// 12 of 16 interrupted training runs crashed, every crash inside oneDNN's
// JIT code). So main() blocks both signals before any other thread exists —
// every OpenMP and oneDNN thread inherits the mask and never takes them — and
// one dedicated thread receives them with sigwait(). No handler ever runs.
//
// What a signal does:
//   - inside a StopScope (training, serving): the first sets the stop flag,
//     which the trainer polls after every step (the server: every few
//     milliseconds); a second one exits at once with 128 + signal, after
//     one line on stderr;
//   - anywhere else (loading data, translating, writing outputs): the process
//     ends at once, killed by that signal as if attn had no handling at all.
#pragma once

namespace attn::cli {

// Blocks SIGINT and SIGTERM in the calling thread and starts the thread that
// receives them. Call first thing in main(), before any thread is created.
void start_signal_thread();

// While one is alive, SIGINT and SIGTERM ask to stop instead of ending the
// process. Not nestable. `again` is the line printed when a second signal
// ends the process at once (default: training's, which saves nothing then).
class StopScope {
 public:
  explicit StopScope(const char* again = nullptr);
  ~StopScope();
  StopScope(const StopScope&) = delete;
  StopScope& operator=(const StopScope&) = delete;
};

// The signal that asked to stop inside the current or last StopScope, or 0.
// Once a scope has ended, a signal is either counted here or has ended the
// process: none is lost between the two.
int stop_signal();

// Ends the process as `sig`'s default action would.
[[noreturn]] void end_by_signal(int sig);

}  // namespace attn::cli
