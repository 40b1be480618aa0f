// tests/apps/spawn.h — running the attn executable from a test: start it
// (stdout and stderr into files), wait for it, signal it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

extern char** environ;

namespace attn::testing {

// Starts `attn` with `args`, stdout and stderr into <log_stem>.out and .err,
// in directory `cwd` (empty: this process's). Returns the pid, or -1.
inline pid_t spawn_attn(const std::string& attn, const std::vector<std::string>& args,
                        const std::filesystem::path& log_stem,
                        const std::filesystem::path& cwd = {}) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  std::string out = log_stem.string() + ".out", err = log_stem.string() + ".err";
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  std::vector<std::string> all = {attn};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, attn.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << "cannot start " << attn << ": " << std::strerror(rc);
  return rc == 0 ? pid : -1;
}

inline int wait_status(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return status;
}

// The exit code, or 128 + the signal that ended the process.
inline int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs attn to its end; returns its exit code (or 128 + signal).
inline int run_attn(const std::string& attn, const std::vector<std::string>& args,
                    const std::filesystem::path& log_stem, const std::filesystem::path& cwd = {}) {
  pid_t pid = spawn_attn(attn, args, log_stem, cwd);
  if (pid < 0) return -1;
  return exit_code(wait_status(pid));
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace attn::testing
