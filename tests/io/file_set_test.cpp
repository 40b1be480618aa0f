// The file-set protocol (io/file_set.h): every state a killed writer can
// leave reads as the complete old set or the complete new one; recovery
// completes or discards it; files that do not match the manifest are named.
#include "attn/io/file_set.h"

#include <fstream>

#include "attn/io/digest.h"
#include "attn/io/dir_lock.h"
#include "testing.h"

using namespace attn;
using namespace attn::io;
namespace fs = std::filesystem;

namespace {

void put(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

class FileSetTest : public attn::testing::TempDirTest {
 protected:
  // The set as read: name -> bytes.
  std::map<std::string, std::string> read_set() {
    FileSet set(dir_, "test-kind");
    std::map<std::string, std::string> out;
    for (const auto& e : set.manifest().files) out[e.name] = set.file(e.name).read_all(1 << 20);
    return out;
  }
  std::string read_error() {
    try {
      read_set();
    } catch (const IOError& e) {
      return e.what();
    }
    return "no error";
  }
  const std::vector<std::pair<std::string, std::string>> old_files = {{"a.txt", "old a\n"},
                                                                      {"b.bin", "old b"}};
  const std::vector<std::pair<std::string, std::string>> new_files = {{"a.txt", "new a, longer\n"},
                                                                      {"b.bin", "new b"}};
  std::map<std::string, std::string> as_map(
      const std::vector<std::pair<std::string, std::string>>& v) {
    return {v.begin(), v.end()};
  }
  std::string manifest_of(const std::vector<std::pair<std::string, std::string>>& files) {
    Manifest m;
    m.kind = "test-kind";
    for (const auto& [n, b] : files) m.files.push_back({n, b.size(), sha256_hex(b)});
    return manifest_to_json(m);
  }
};

}  // namespace

TEST_F(FileSetTest, WriteThenReadGivesTheSet) {
  write_file_set(dir_, "test-kind", old_files);
  EXPECT_EQ(read_set(), as_map(old_files));
  write_file_set(dir_, "test-kind", new_files);
  EXPECT_EQ(read_set(), as_map(new_files));
  EXPECT_FALSE(fs::exists(dir_ / kPendingDir));
  // A set of other files: the old ones it lacks are removed.
  write_file_set(dir_, "test-kind", {{"c.txt", "c"}});
  EXPECT_EQ(read_set(), (std::map<std::string, std::string>{{"c.txt", "c"}}));
  EXPECT_FALSE(fs::exists(dir_ / "a.txt"));
  // The manifest is what sha256sum says.
  EXPECT_NE(attn::testing::read_file(dir_ / kManifestFile)
                .find("2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6"),
            std::string::npos);  // sha256("c")
}

// Each state of an interrupted write, made by hand.
TEST_F(FileSetTest, EveryStateOfAnInterruptedWriteReadsWhole) {
  write_file_set(dir_, "test-kind", old_files);
  const fs::path pending = dir_ / kPendingDir;
  // 1. Killed while staging: .pending holds part of the new set; the
  //    manifest is the old one.
  fs::create_directory(pending);
  put(pending / "a.txt", new_files[0].second);
  EXPECT_EQ(read_set(), as_map(old_files));
  // 2. Killed after the commit, before any rename: the new manifest, old
  //    files in place, the new ones in .pending.
  put(pending / "b.bin", new_files[1].second);
  put(dir_ / kManifestFile, manifest_of(new_files));
  EXPECT_EQ(read_set(), as_map(new_files));
  // 3. Killed in the middle of the renames.
  fs::rename(pending / "a.txt", dir_ / "a.txt");
  EXPECT_EQ(read_set(), as_map(new_files));
  // Recovery completes state 3 (and 2) ...
  recover_file_set(dir_);
  EXPECT_FALSE(fs::exists(pending));
  EXPECT_EQ(read_set(), as_map(new_files));
  EXPECT_EQ(attn::testing::read_file(dir_ / "b.bin"), new_files[1].second);
  // ... and discards state 1.
  fs::create_directory(pending);
  put(pending / "a.txt", "half of something");
  put(dir_ / ".manifest.json.tmp.123.0.7", "{");
  recover_file_set(dir_);
  EXPECT_FALSE(fs::exists(pending));
  EXPECT_FALSE(fs::exists(dir_ / ".manifest.json.tmp.123.0.7"));
  EXPECT_EQ(read_set(), as_map(new_files));
}

TEST_F(FileSetTest, FilesThatDoNotMatchAreNamed) {
  write_file_set(dir_, "test-kind", old_files);
  put(dir_ / "b.bin", "old B");  // same size, other bytes
  EXPECT_EQ(read_error(), "'" + (dir_ / "b.bin").string() + "' does not match '" +
                              (dir_ / "manifest.json").string() +
                              "' (its SHA-256 differs from the manifest's): the files of '" +
                              dir_.string() + "' do not belong together");
  put(dir_ / "b.bin", "old b, and more");
  EXPECT_NE(read_error().find("(15 bytes, but the manifest says 5)"), std::string::npos);
  fs::remove(dir_ / "b.bin");
  EXPECT_EQ(read_error(), "'" + dir_.string() + "' has no b.bin (its manifest lists it)");
  fs::create_symlink("b.bin", dir_ / "b.bin");  // a loop
  EXPECT_EQ(read_error(),
            "cannot open '" + (dir_ / "b.bin").string() + "': Too many levels of symbolic links");
  fs::remove(dir_ / "b.bin");
  ASSERT_EQ(mkfifo((dir_ / "b.bin").c_str(), 0644), 0);
  EXPECT_EQ(read_error(),
            "cannot read '" + (dir_ / "b.bin").string() + "': it is a FIFO, not a regular file");
  fs::remove(dir_ / kManifestFile);
  EXPECT_THROW(read_set(), MissingManifestError);
  put(dir_ / kManifestFile,
      "{\"format\": \"attn-manifest\", \"format_version\": 1, "
      "\"kind\": \"test-kind\", \"files\": [{\"name\": \"../x\", "
      "\"bytes\": 1, \"sha256\": \"00\"}]}");
  EXPECT_NE(read_error().find("\"../x\" is not a file name a set may hold"), std::string::npos);
  write_file_set(dir_ / "other", "other-kind", old_files);
  try {
    FileSet s(dir_ / "other", "test-kind");
    ADD_FAILURE();
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("\"kind\" is \"other-kind\", not \"test-kind\""),
              std::string::npos);
  }
}

TEST_F(FileSetTest, WriteManifestVouchesForFilesAsTheyAre) {
  put(dir_ / "a.txt", "a");
  put(dir_ / "b.bin", "bb");
  Manifest m = write_manifest(dir_, "test-kind", {"a.txt", "b.bin"});
  ASSERT_EQ(m.files.size(), 2u);
  EXPECT_EQ(m.files[1].bytes, 2u);
  EXPECT_EQ(read_set(), (std::map<std::string, std::string>{{"a.txt", "a"}, {"b.bin", "bb"}}));
  EXPECT_THROW(write_manifest(dir_, "test-kind", {"missing.txt"}), IOError);
}

TEST_F(FileSetTest, OneWriterPerDirectory) {
  {
    DirectoryLock lock(dir_, "test writer");
    EXPECT_TRUE(directory_locked(dir_));
    try {
      DirectoryLock second(dir_, "second");
      ADD_FAILURE();
    } catch (const IOError& e) {
      EXPECT_EQ(std::string(e.what()),
                fmt::format("'{}' is in use by process {} (test writer); wait for it to end or "
                            "stop it",
                            dir_.string(), ::getpid()));
    }
    // Inside the lock this process holds, a writer proceeds.
    WriteGuard guard(dir_, "inner");
    write_file_set(dir_, "test-kind", old_files);
  }
  EXPECT_FALSE(directory_locked(dir_));
  WriteGuard guard(dir_, "alone");  // takes the lock itself
  EXPECT_TRUE(directory_locked(dir_));
}

// release_and_remove: a guard that took the lock itself removes the lock
// file as it lets go; one inside a lock this process holds leaves both
// alone. A lock taken afterwards is on the file the path names.
TEST_F(FileSetTest, ReleaseAndRemoveOnlyByTheGuardThatTookTheLock) {
  {
    DirectoryLock outer(dir_, "outer");
    WriteGuard inner(dir_, "inner");
    inner.release_and_remove();
    EXPECT_TRUE(fs::exists(dir_ / kLockFile));
    EXPECT_TRUE(directory_locked(dir_));
  }
  {
    WriteGuard alone(dir_, "alone");
    EXPECT_TRUE(directory_locked(dir_));
    alone.release_and_remove();
    EXPECT_FALSE(fs::exists(dir_ / kLockFile));
    EXPECT_FALSE(directory_locked(dir_));
  }
  DirectoryLock again(dir_, "again");
  EXPECT_TRUE(fs::exists(dir_ / kLockFile));
  EXPECT_TRUE(directory_locked(dir_));
}
