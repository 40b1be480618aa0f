// attn/io/file_set.h — files in one directory that readers see as one unit.
//
// A model directory is several files (config, weights, vocabularies) that
// only make sense together. write_file_set() replaces them so that a reader,
// at any instant — also after a kill -9 anywhere inside the write — sees
// either the complete old set or the complete new one, and read_file_set()
// refuses a file that does not belong to the set (edited, swapped, copied from
// another directory), naming it. The protocol (docs/model-format.md):
//
//   DIR/manifest.json   {"format": "attn-manifest", "format_version": 1,
//                        "kind": "<what the set is>",
//                        "files": [{"name", "bytes", "sha256"}, ...]}
//
//   write:  1. finish or discard what an interrupted write left (recover)
//           2. write every new file into DIR/.pending/ (fsync'ed)
//           3. replace manifest.json atomically        <- the commit point
//           4. rename each .pending/<name> over DIR/<name>; remove .pending/
//   read:   manifest.json, then each file it lists: DIR/<name> if its size
//           and SHA-256 match, else DIR/.pending/<name> if that one does
//           (a write between 3 and 4); else, after a few short retries (a
//           write may be under way), an IOError naming the file.
//
// Before 3 every listed file in DIR is the old one and matches the old
// manifest; after 3 each new file is in DIR or in .pending/. Writers must
// hold the directory's DirectoryLock (one writer at a time); readers take no
// lock. The files are read back through the descriptors that were checked, so
// a rename after the check cannot swap what is read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attn/core/error.h"
#include "attn/io/read_file.h"

namespace attn::io {

inline constexpr const char* kManifestFile = "manifest.json";

// A directory without a manifest.json (its files cannot be checked).
class MissingManifestError : public IOError {
 public:
  using IOError::IOError;
};
inline constexpr const char* kPendingDir = ".pending";

struct ManifestEntry {
  std::string name;  // a plain file name in the directory (no '/')
  std::uint64_t bytes = 0;
  std::string sha256;  // lower-case hex
};

struct Manifest {
  std::string kind;  // e.g. "attn-model"
  std::vector<ManifestEntry> files;
};

// Replaces the set in `dir` (created if missing) by `files` (name, bytes), as
// above. Files of the old set that the new one lacks are removed after the
// commit. The caller holds `dir`'s DirectoryLock.
void write_file_set(const std::filesystem::path& dir, const std::string& kind,
                    const std::vector<std::pair<std::string, std::string>>& files);

// Step 1 of a write, on its own: completes a write that was cut after its
// commit point, discards one cut before it, removes stale temp files of the
// manifest. The caller holds the lock.
void recover_file_set(const std::filesystem::path& dir);

// Writes `dir`'s manifest for the files `names` as they are now (for a set
// written by other tools, e.g. a model exported from PyTorch). The caller
// holds the lock. Returns the manifest written.
Manifest write_manifest(const std::filesystem::path& dir, const std::string& kind,
                        const std::vector<std::string>& names);
// The same for files the caller has open (and checked): each is hashed
// through its own descriptor, or its bytes after InputFile::snapshot(), so
// the manifest vouches for exactly what the caller checked, whatever
// happened to the names meanwhile.
Manifest write_manifest_of_open(const std::filesystem::path& dir, const std::string& kind,
                                const std::vector<std::pair<std::string, const InputFile*>>& files);

// A set read and checked (see the top). Holds every listed file open.
class FileSet {
 public:
  // IOError: no manifest ("'DIR' has no manifest.json ..."), a manifest that
  // is not one, of another kind, a listed file missing or not matching.
  FileSet(const std::filesystem::path& dir, const std::string& kind);

  const Manifest& manifest() const { return manifest_; }
  bool contains(const std::string& name) const { return files_.count(name) > 0; }
  // The checked file; IOError "'DIR/manifest.json' does not list <name>".
  const InputFile& file(const std::string& name) const;

 private:
  std::filesystem::path dir_;
  Manifest manifest_;
  std::map<std::string, InputFile> files_;
};

// Whether `path` is part of a file set: its directory's manifest.json (a
// readable one) lists its name, or it is that manifest. Commands that write
// a file the user names refuse such a one: a set is replaced whole by its
// own writer, never one file of it by another output.
bool in_file_set(const std::filesystem::path& path);

// The kind of the set whose manifest is in `dir` ("attn-model"), or "" when
// it has no readable manifest.
std::string file_set_kind(const std::filesystem::path& dir);

// Parses manifest text (exposed for tests and the fuzzer); `what` names it.
Manifest parse_manifest(const std::string& text, const std::string& what);
std::string manifest_to_json(const Manifest& manifest);

}  // namespace attn::io
