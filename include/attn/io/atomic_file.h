// attn/io/atomic_file.h — files that appear whole or not at all.
//
// Every file attn writes (models, vocabularies, configs, figures) goes through
// here: the bytes are written to a temporary file in the target's directory,
// fsync'ed, renamed over the target (atomic on POSIX file systems) and the
// directory is fsync'ed. A crash or an error at any point leaves either the old
// file or the new one, never a half-written one, and never a stray temp file
// (on error the temp file is removed). Failures throw attn::IOError naming the
// path and the system's reason (strerror).
//
// What may be written is one rule, output_path_refusal() below, which every
// file attn writes passes through (AtomicFile checks it when it is made and
// again just before its rename; the CLI checks its output flags with it
// before any work). The target's directory must exist: it is not created implicitly (a typo in a
// path should not silently create folders). Callers that own an output folder
// (the CLI's --out) create it with ensure_directory first.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>

namespace attn::io {

// Why attn must not write a file at `path`, or "" when it may. It may when
// nothing is there, or a regular file that has a write bit (one of 0222;
// root's right to write anyway is not used: a file made read-only is kept).
// Never replaced: a directory, a symbolic link (dangling or not: writing
// through it would change a file the user did not name, replacing it would
// lose the link), a FIFO, a socket, a character or block device, a
// read-only file. The reason names the path:
//   "'/dev/full' is a character device, not a regular file; attn does not replace it"
//   "'m.onnx' is read-only; attn does not replace it"
// A missing parent directory is not judged here (AtomicFile: it must exist;
// the CLI creates the folders of its own outputs).
std::string output_path_refusal(const std::filesystem::path& path);
// IOError with that reason, prefixed by `what` ("export: ") when given.
void check_output_path(const std::filesystem::path& path, std::string_view what = {});

// mkdir -p: creates `dir` and any missing parents. Nothing happens if it is
// already a directory; IOError if it (or a parent) exists and is not one, or
// if it cannot be created.
void ensure_directory(const std::filesystem::path& dir);

// Makes the entries of `dir` durable (fsync of the directory: a rename or a
// removal in it survives a crash). File systems that cannot fsync a
// directory (EINVAL, EROFS) are let be; another failure is an IOError.
void fsync_directory(const std::filesystem::path& dir);

// Writes `bytes` to `path` atomically (see above). Replaces an existing
// regular file; refuses what output_path_refusal() names.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);
void write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes);

// The lower-level form, for writers that stream or need a file name of their own:
//
//   AtomicFile f("out/model.safetensors");
//   f.write(header); f.write(payload);       // or write to f.temp_path() yourself
//   f.commit();                              // fsync, rename, fsync the directory
//
// Destroying an AtomicFile that was not committed removes the temp file, so an
// exception between construction and commit() leaves nothing behind.
class AtomicFile {
 public:
  // Creates the (empty) temp file `<dir>/.<name>.tmp.<unique>` beside `target`.
  explicit AtomicFile(std::filesystem::path target);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::filesystem::path& target() const { return target_; }
  const std::filesystem::path& temp_path() const { return temp_; }
  bool committed() const { return committed_; }

  // Appends to the temp file (handles short writes and EINTR).
  void write(std::string_view bytes);
  void write(std::span<const std::byte> bytes);

  // Makes the temp file durable and puts it in place of the target. If the
  // temp file was written through temp_path() by someone else, that is fine:
  // it is reopened and fsync'ed here. On failure the temp file is removed.
  void commit();
  // Removes the temp file without touching the target (also done by the destructor).
  void abort() noexcept;

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace attn::io
