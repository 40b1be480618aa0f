#include "attn/io/file_set.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include "attn/core/error.h"
#include "attn/io/atomic_file.h"
#include "attn/io/digest.h"
#include "attn/io/dir_lock.h"
#include "attn/io/json.h"

namespace attn::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "attn-manifest";
constexpr std::uint64_t kMaxManifestBytes = 1 << 20;
constexpr std::size_t kMaxFiles = 1000;

std::string quoted(const fs::path& p) { return fmt::format("'{}'", p.string()); }

bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && name[0] != '.' && name != kManifestFile;
}

void check_name(const std::string& name, const std::string& what) {
  ATTN_CHECK(valid_name(name), IOError,
             "{}: \"{}\" is not a file name a set may hold (a plain name, not hidden, not {})",
             what, printable_excerpt(name), kManifestFile);
}

// Writes `bytes` to a new file `path` (which must not exist) and fsyncs it.
void write_new_file(const fs::path& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  ATTN_CHECK(fd >= 0, IOError, "cannot write '{}': {}", path.string(), std::strerror(errno));
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  int err = 0;
  while (left > 0 && err == 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno != EINTR) err = errno;
      continue;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  ATTN_CHECK(err == 0, IOError, "cannot write '{}': {}", path.string(), std::strerror(err));
}

// The manifest in `dir` if there is a readable one, else an empty one.
Manifest current_manifest(const fs::path& dir) {
  try {
    InputFile f((dir / kManifestFile).string());
    return parse_manifest(f.read_all(kMaxManifestBytes), quoted(dir / kManifestFile));
  } catch (const Error&) {
    return {};
  }
}

// Whether `path` is the file `e` describes; `why` says why not: "missing",
// a size or digest that differs, or the error opening it.
struct Check {
  enum { ok, missing, unreadable, differs } result = ok;
  std::string why;
};

Check check_file(const fs::path& path, const ManifestEntry& e, std::optional<InputFile>* out) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return {Check::missing, "missing"};
  try {
    InputFile f(path.string());
    if (f.size() != e.bytes)
      return {Check::differs, fmt::format("{} bytes, but the manifest says {}", f.size(), e.bytes)};
    if (f.sha256() != e.sha256) return {Check::differs, "its SHA-256 differs from the manifest's"};
    if (out) out->emplace(std::move(f));
    return {};
  } catch (const IOError& err) {
    return {Check::unreadable, err.what()};
  }
}

}  // namespace

bool in_file_set(const fs::path& path) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::string name = path.filename().string();
  const Manifest m = current_manifest(dir);
  if (m.kind.empty()) return false;
  if (name == kManifestFile) return true;
  for (const auto& e : m.files)
    if (e.name == name) return true;
  return false;
}

std::string file_set_kind(const fs::path& dir) { return current_manifest(dir).kind; }

std::string manifest_to_json(const Manifest& m) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const auto& e : m.files)
    files.push_back({{"name", e.name}, {"bytes", e.bytes}, {"sha256", e.sha256}});
  nlohmann::ordered_json j = {
      {"format", kFormat}, {"format_version", 1}, {"kind", m.kind}, {"files", files}};
  return j.dump(2) + "\n";
}

Manifest parse_manifest(const std::string& text, const std::string& what) {
  nlohmann::json j = parse_json_strict(text, what);
  JsonObject root(j, what);
  ATTN_CHECK(root.string("format") == kFormat, IOError, "{}: \"format\" must be \"{}\", got {}",
             what, kFormat, describe_json(root.get("format")));
  root.integer("format_version", 1, 1);
  Manifest m;
  m.kind = root.string("kind");
  const auto& files = root.get("files");
  ATTN_CHECK(files.is_array() && files.size() <= kMaxFiles, IOError,
             "{}: \"files\" must be a list of at most {} files, got {}", what, kMaxFiles,
             describe_json(files));
  std::set<std::string> seen;
  for (std::size_t i = 0; i < files.size(); ++i) {
    JsonObject f(files[i], what, fmt::format("files[{}]", i));
    ManifestEntry e;
    e.name = f.string("name");
    check_name(e.name, what);
    ATTN_CHECK(seen.insert(e.name).second, IOError, "{}: file \"{}\" is listed twice", what,
               printable_excerpt(e.name));
    e.bytes = static_cast<std::uint64_t>(f.integer("bytes", 0, std::int64_t{1} << 50));
    e.sha256 = f.string("sha256");
    ATTN_CHECK(e.sha256.size() == 64 &&
                   e.sha256.find_first_not_of("0123456789abcdef") == std::string::npos,
               IOError, "{}: {} must be 64 lower-case hex digits, got {}", what, f.name("sha256"),
               describe_json(f.get("sha256")));
    m.files.push_back(std::move(e));
  }
  return m;
}

void recover_file_set(const fs::path& dir) {
  std::error_code ec;
  const std::string temp_prefix = fmt::format(".{}.tmp.", kManifestFile);
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(temp_prefix, 0) == 0) fs::remove(e.path(), ec);
  const fs::path pending = dir / kPendingDir;
  if (!fs::exists(fs::symlink_status(pending, ec))) return;
  // Files that the manifest lists and .pending holds, whole: a write cut
  // after its commit point. Anything else there is a write cut before it.
  for (const auto& e : current_manifest(dir).files) {
    const fs::path p = pending / e.name;
    if (check_file(p, e, nullptr).result == Check::ok &&
        ::rename(p.c_str(), (dir / e.name).c_str()) != 0)
      throw IOError(fmt::format("cannot complete the interrupted write of '{}': rename: {}",
                                (dir / e.name).string(), std::strerror(errno)));
  }
  fsync_directory(dir);
  fs::remove_all(pending, ec);
  ATTN_CHECK(!ec, IOError, "cannot remove '{}': {}", pending.string(), ec.message());
}

void write_file_set(const fs::path& dir, const std::string& kind,
                    const std::vector<std::pair<std::string, std::string>>& files) {
  ensure_directory(dir);
  recover_file_set(dir);
  Manifest m;
  m.kind = kind;
  for (const auto& [name, bytes] : files) {
    check_name(name, "write_file_set");
    check_output_path(dir / name);  // a link, FIFO or device there is never replaced
    m.files.push_back({name, bytes.size(), sha256_hex(bytes)});
  }
  check_output_path(dir / kManifestFile);
  const Manifest old = current_manifest(dir);
  const fs::path pending = dir / kPendingDir;
  std::error_code ec;
  ATTN_CHECK(fs::create_directory(pending, ec) && !ec, IOError, "cannot create '{}': {}",
             pending.string(), ec ? ec.message() : "it exists");
  try {
    for (const auto& [name, bytes] : files) write_new_file(pending / name, bytes);
    fsync_directory(pending);
  } catch (...) {
    fs::remove_all(pending, ec);
    throw;
  }
  // The commit point: from here on readers see the new set.
  write_file_atomic(dir / kManifestFile, manifest_to_json(m));
  for (const auto& [name, bytes] : files)
    if (::rename((pending / name).c_str(), (dir / name).c_str()) != 0)
      throw IOError(fmt::format("cannot write '{}': rename: {} (the next write completes it)",
                                (dir / name).string(), std::strerror(errno)));
  for (const auto& e : old.files) {
    bool kept = false;
    for (const auto& f : m.files) kept = kept || f.name == e.name;
    if (!kept) fs::remove(dir / e.name, ec);
  }
  fsync_directory(dir);
  fs::remove(pending, ec);
}

Manifest write_manifest_of_open(
    const fs::path& dir, const std::string& kind,
    const std::vector<std::pair<std::string, const InputFile*>>& files) {
  recover_file_set(dir);
  Manifest m;
  m.kind = kind;
  for (const auto& [name, file] : files) {
    check_name(name, "write_manifest");
    m.files.push_back({name, file->size(), file->sha256()});
  }
  write_file_atomic(dir / kManifestFile, manifest_to_json(m));
  return m;
}

Manifest write_manifest(const fs::path& dir, const std::string& kind,
                        const std::vector<std::string>& names) {
  std::vector<InputFile> open;
  open.reserve(names.size());
  std::vector<std::pair<std::string, const InputFile*>> files;
  for (const auto& name : names) {
    check_name(name, "write_manifest");
    files.emplace_back(name, &open.emplace_back((dir / name).string()));
  }
  return write_manifest_of_open(dir, kind, files);
}

FileSet::FileSet(const fs::path& dir, const std::string& kind) : dir_(dir) {
  struct stat st {};
  ATTN_CHECK(::stat(dir.c_str(), &st) == 0, IOError, "model directory '{}': {}", dir.string(),
             errno == ENOENT ? std::string("does not exist") : std::strerror(errno));
  ATTN_CHECK(S_ISDIR(st.st_mode), IOError, "model directory '{}' is not a directory", dir.string());
  const fs::path manifest_path = dir / kManifestFile;
  // A write under way can make a file disagree with the manifest read just
  // before it; while a writer holds the lock, look again a few times.
  for (int attempt = 0;; ++attempt) {
    if (::lstat(manifest_path.c_str(), &st) != 0 && errno == ENOENT)
      throw MissingManifestError(
          fmt::format("'{}' has no {}: its files cannot be checked to belong together",
                      dir.string(), kManifestFile));
    InputFile mf(manifest_path.string());
    manifest_ = parse_manifest(mf.read_all(kMaxManifestBytes), quoted(manifest_path));
    ATTN_CHECK(manifest_.kind == kind, IOError, "{}: \"kind\" is \"{}\", not \"{}\"",
               quoted(manifest_path), printable_excerpt(manifest_.kind), kind);
    files_.clear();
    std::string problem;
    for (const auto& e : manifest_.files) {
      std::optional<InputFile> f;
      Check c = check_file(dir / e.name, e, &f);
      if (c.result != Check::ok &&
          check_file(dir / kPendingDir / e.name, e, &f).result == Check::ok)
        c = {};
      if (c.result == Check::missing)
        problem = fmt::format("'{}' has no {} (its manifest lists it)", dir.string(), e.name);
      else if (c.result == Check::unreadable)
        problem = c.why;
      else if (c.result == Check::differs)
        problem = fmt::format(
            "'{}' does not match '{}' ({}): the files of '{}' do not belong "
            "together",
            (dir / e.name).string(), manifest_path.string(), c.why, dir.string());
      if (!problem.empty()) break;
      files_.emplace(e.name, std::move(*f));
    }
    if (problem.empty()) return;
    if (attempt >= 3 || !directory_locked(dir)) throw IOError(problem);
    std::this_thread::sleep_for(std::chrono::milliseconds(10 << (2 * attempt)));
  }
}

const InputFile& FileSet::file(const std::string& name) const {
  auto it = files_.find(name);
  ATTN_CHECK(it != files_.end(), IOError, "'{}' does not list {}", (dir_ / kManifestFile).string(),
             name);
  return it->second;
}

}  // namespace attn::io
