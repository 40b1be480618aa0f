// attn/io/read_file.h — reading files, with errors that name them.
//
// Two kinds of input:
//   - files that must be regular files (a model's weights, config,
//     vocabularies, manifest; checkpoints): InputFile opens them without
//     blocking (a FIFO is refused, never waited on), knows their size before
//     anything is allocated, and reads exactly what is asked;
//   - text that may also come from a stream (a corpus given as a FIFO,
//     /dev/stdin, a process substitution): read_file_bytes reads it in
//     bounded chunks and stops at `max_bytes`.
// Messages name the path and the system's reason: "cannot open 'x': Too many
// levels of symbolic links", "'x' is a directory", "'x' is not a regular file
// (a FIFO)".
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

namespace attn::io {

// The bytes of the file or stream at `path`. IOError naming the path for a
// missing or unreadable file, a directory, or more than `max_bytes` bytes
// (a regular file's size is checked before reading).
std::string read_file_bytes(const std::string& path,
                            std::uint64_t max_bytes = std::numeric_limits<std::uint64_t>::max());

// A regular file open for reading. The descriptor pins the file: a rename
// over its path (an atomic write by another process) does not change what
// this object reads.
class InputFile {
 public:
  // IOError: missing, unreadable, a symbolic-link loop, a directory, not a
  // regular file (FIFO, device, socket).
  explicit InputFile(std::string path);
  ~InputFile();
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }

  // Bytes [offset, offset + n) into `out`; IOError when the file ends early
  // (it shrank since it was opened).
  void read_at(std::uint64_t offset, void* out, std::size_t n) const;
  // The whole file; IOError when it is larger than `max_bytes`.
  std::string read_all(std::uint64_t max_bytes) const;
  // SHA-256 of the whole file, lower-case hex, read in chunks.
  std::string sha256() const;

  // Reads the whole file once into memory (at most `max_bytes`, else
  // IOError); every read after it, sha256() included, serves those bytes.
  // What is checked and what is hashed are then the same bytes, however the
  // file changes on disk meanwhile (written in place, truncated).
  void snapshot(std::uint64_t max_bytes);

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::shared_ptr<const std::string> bytes_;  // after snapshot()
};

// "a FIFO", "a character device", "a socket", ...: what a stat mode is, for
// messages that refuse it.
std::string file_kind(unsigned mode);

}  // namespace attn::io
