#include "attn/io/atomic_file.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>
#include "testing.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attn/core/error.h"

namespace fs = std::filesystem;
using attn::IOError;
using attn::io::AtomicFile;
using attn::io::ensure_directory;
using attn::io::write_file_atomic;

namespace {

// A fresh, empty directory per test, removed afterwards.
using AtomicFileTest = attn::testing::TempDirTest;

using attn::testing::read_file;

template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const IOError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_F(AtomicFileTest, WritesNewFileWithExactBytes) {
  std::string bytes("abc\0def\n", 8);
  write_file_atomic(dir_ / "a.bin", bytes);
  EXPECT_EQ(read_file(dir_ / "a.bin"), bytes);
  EXPECT_EQ(names(), std::vector<std::string>{"a.bin"});
}

TEST_F(AtomicFileTest, ReplacesExistingFile) {
  write_file_atomic(dir_ / "a.txt", "old contents, rather long");
  write_file_atomic(dir_ / "a.txt", "new");
  EXPECT_EQ(read_file(dir_ / "a.txt"), "new");
  EXPECT_EQ(names().size(), 1u);
}

TEST_F(AtomicFileTest, WritesEmptyFile) {
  write_file_atomic(dir_ / "empty", std::string_view());
  EXPECT_TRUE(fs::exists(dir_ / "empty"));
  EXPECT_EQ(fs::file_size(dir_ / "empty"), 0u);
}

TEST_F(AtomicFileTest, FileGetsUmaskPermissionsNotTempfilePermissions) {
  write_file_atomic(dir_ / "p", "x");
  mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "p").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

TEST_F(AtomicFileTest, MissingDirectoryIsAnErrorNamingIt) {
  fs::path target = dir_ / "no_such_dir" / "a.txt";
  std::string msg = error_message([&] { write_file_atomic(target, "x"); });
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  EXPECT_NE(msg.find((dir_ / "no_such_dir").string()), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir_ / "no_such_dir"));
}

TEST_F(AtomicFileTest, TargetThatIsADirectoryIsAnError) {
  fs::create_directory(dir_ / "sub");
  std::string msg = error_message([&] { write_file_atomic(dir_ / "sub", "x"); });
  EXPECT_NE(msg.find((dir_ / "sub").string()), std::string::npos) << msg;
  EXPECT_EQ(names(), std::vector<std::string>{"sub"});
}

TEST_F(AtomicFileTest, ParentThatIsAFileIsAnError) {
  write_file_atomic(dir_ / "f", "x");
  EXPECT_THROW(write_file_atomic(dir_ / "f" / "a.txt", "x"), IOError);
}

TEST_F(AtomicFileTest, TargetTakenBeforeCommitLeavesNoTempFileAndNamesPath) {
  // A non-empty directory appears at the target after the temp file was
  // created: the check just before the rename refuses it.
  fs::path target = dir_ / "target";
  AtomicFile file(target);
  file.write("payload");
  EXPECT_TRUE(fs::exists(file.temp_path()));
  EXPECT_EQ(file.temp_path().parent_path(), dir_);
  fs::create_directories(target / "child");
  std::string msg = error_message([&] { file.commit(); });
  EXPECT_NE(msg.find(target.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
  EXPECT_EQ(names(), std::vector<std::string>{"target"});  // only the directory
  EXPECT_TRUE(fs::is_directory(target));
}

// The one rule (output_path_refusal): what is not a regular file with a
// write bit is never replaced, and nothing beside it is left behind.
TEST_F(AtomicFileTest, RefusesWhatIsNotAWritableRegularFile) {
  write_file_atomic(dir_ / "victim", "the file a link points to");
  fs::create_symlink(dir_ / "victim", dir_ / "link");
  fs::create_symlink(dir_ / "nowhere", dir_ / "dangling");
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0666), 0);
  write_file_atomic(dir_ / "ro", "read-only");
  fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::group_read);
  const std::vector<std::string> before = names();
  for (const auto& [name, says] : std::vector<std::pair<std::string, std::string>>{
           {"link", "is a symbolic link, not a regular file; attn does not replace it"},
           {"dangling", "is a symbolic link"},
           {"fifo", "is a FIFO"},
           {"ro", "is read-only; attn does not replace it"}}) {
    std::string msg = error_message([&] { write_file_atomic(dir_ / name, "new"); });
    EXPECT_NE(msg.find(says), std::string::npos) << name << ": " << msg;
    EXPECT_EQ(attn::io::output_path_refusal(dir_ / name).empty(), false) << name;
  }
  EXPECT_EQ(names(), before);
  EXPECT_EQ(read_file(dir_ / "victim"), "the file a link points to");
  EXPECT_EQ(read_file(dir_ / "ro"), "read-only");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link"));
  EXPECT_TRUE(fs::is_fifo(dir_ / "fifo"));
  EXPECT_EQ(attn::io::output_path_refusal(dir_ / "victim"), "");
  EXPECT_EQ(attn::io::output_path_refusal(dir_ / "not-there"), "");
}

TEST_F(AtomicFileTest, LinkPlacedBeforeCommitIsNotReplaced) {
  write_file_atomic(dir_ / "victim", "keep");
  AtomicFile file(dir_ / "out");
  file.write("payload");
  fs::create_symlink(dir_ / "victim", dir_ / "out");
  std::string msg = error_message([&] { file.commit(); });
  EXPECT_NE(msg.find("symbolic link"), std::string::npos) << msg;
  EXPECT_TRUE(fs::is_symlink(dir_ / "out"));
  EXPECT_EQ(read_file(dir_ / "victim"), "keep");
  EXPECT_EQ(names(), (std::vector<std::string>{"out", "victim"}));
}

TEST_F(AtomicFileTest, UncommittedFileIsRemovedAndTargetUntouched) {
  write_file_atomic(dir_ / "keep.txt", "original");
  fs::path temp;
  try {
    AtomicFile file(dir_ / "keep.txt");
    temp = file.temp_path();
    file.write("half of the new con");
    throw std::runtime_error("crash mid-write");
  } catch (const std::runtime_error&) {}
  EXPECT_FALSE(temp.empty());
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_EQ(read_file(dir_ / "keep.txt"), "original");
  EXPECT_EQ(names(), std::vector<std::string>{"keep.txt"});
}

TEST_F(AtomicFileTest, TargetInvisibleUntilCommit) {
  AtomicFile file(dir_ / "late.txt");
  file.write("part 1, ");
  file.write("part 2");
  EXPECT_FALSE(fs::exists(dir_ / "late.txt"));
  file.commit();
  EXPECT_TRUE(file.committed());
  EXPECT_EQ(read_file(dir_ / "late.txt"), "part 1, part 2");
  EXPECT_EQ(names().size(), 1u);
  EXPECT_THROW(file.write("more"), IOError);
  EXPECT_THROW(file.commit(), IOError);
}

TEST_F(AtomicFileTest, ContentsWrittenThroughTempPathAreCommitted) {
  AtomicFile file(dir_ / "by_name.txt");
  {
    std::ofstream out(file.temp_path(), std::ios::binary | std::ios::trunc);
    out << "written by another writer";
  }
  file.commit();
  EXPECT_EQ(read_file(dir_ / "by_name.txt"), "written by another writer");
}

TEST_F(AtomicFileTest, RelativePathInCurrentDirectory) {
  fs::path old = fs::current_path();
  fs::current_path(dir_);
  write_file_atomic("rel.txt", "r");
  fs::current_path(old);
  EXPECT_EQ(read_file(dir_ / "rel.txt"), "r");
}

TEST_F(AtomicFileTest, EnsureDirectoryCreatesParents) {
  fs::path deep = dir_ / "a" / "b" / "c";
  ensure_directory(deep);
  EXPECT_TRUE(fs::is_directory(deep));
  ensure_directory(deep);  // already there: fine
  write_file_atomic(deep / "x", "x");
  EXPECT_TRUE(fs::exists(deep / "x"));
}

TEST_F(AtomicFileTest, EnsureDirectoryThroughAFileIsAnError) {
  write_file_atomic(dir_ / "file", "x");
  std::string msg = error_message([&] { ensure_directory(dir_ / "file" / "sub"); });
  EXPECT_NE(msg.find("not a directory"), std::string::npos) << msg;
  EXPECT_NE(msg.find((dir_ / "file").string()), std::string::npos) << msg;
}
