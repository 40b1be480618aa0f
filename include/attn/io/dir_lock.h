// attn/io/dir_lock.h — one writer per directory.
//
// A DirectoryLock holds an exclusive flock(2) on DIR/.lock for its lifetime
// and writes its process id and a label ("attn train") into the file, so that
// a second writer is refused with a message naming the process that holds the
// directory. The kernel releases the lock when the process ends, however it
// ends (kill -9 included): there is no stale lock to clean up. The lock file
// itself stays (empty once released); it is not part of the model.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

namespace attn::io {

inline constexpr const char* kLockFile = ".lock";

class DirectoryLock {
 public:
  // Takes the lock on `dir` (which must exist) or throws IOError:
  //   "'out/model' is in use by process 4242 (attn train); wait for it to end or stop it"
  DirectoryLock(const std::filesystem::path& dir, const std::string& label);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  // Releases the lock and removes the lock file (for a directory about to be
  // removed); the destructor then does nothing.
  void release_and_remove();

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// Holds `dir`'s lock for a scope: does nothing when this process already
// holds it (through a DirectoryLock), else takes it for the scope. Writers of
// a directory's files (save_model, ...) use it, so that they work inside a
// long-held lock (a training run) and on their own.
class WriteGuard {
 public:
  WriteGuard(const std::filesystem::path& dir, const std::string& label);
  ~WriteGuard();
  WriteGuard(const WriteGuard&) = delete;
  WriteGuard& operator=(const WriteGuard&) = delete;

  // DirectoryLock::release_and_remove where the guard took the lock itself;
  // nothing where an outer DirectoryLock of this process holds it.
  void release_and_remove();

 private:
  std::unique_ptr<DirectoryLock> own_;
};

// Whether some process holds `dir`'s lock right now (a read of the directory
// that finds it in flux then knows a writer is at work).
bool directory_locked(const std::filesystem::path& dir);

}  // namespace attn::io
