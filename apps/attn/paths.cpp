#include "paths.h"

#include <system_error>
#include <vector>

// The data directory relative to the program's directory in an installed
// tree ("../share" for GNUInstallDirs' defaults), set by CMakeLists.txt.
#ifndef ATTN_DATADIR_FROM_BINDIR
#error "ATTN_DATADIR_FROM_BINDIR must name the data directory relative to the bin directory"
#endif

namespace attn::cli {

namespace fs = std::filesystem;

fs::path program_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return {};
  return exe.parent_path();
}

std::string default_corpus() {
  const fs::path corpus = fs::path("datasets") / "fra-eng" / "fra.txt.gz";
  const fs::path dir = program_dir();
  if (dir.empty()) return (fs::path(ATTN_DATADIR_FROM_BINDIR) / "attn" / corpus).string();
  const std::vector<fs::path> candidates = {
      (dir / ATTN_DATADIR_FROM_BINDIR / "attn" / corpus).lexically_normal(),  // installed
      dir / corpus,  // build tree
  };
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return candidates.front().string();
}

}  // namespace attn::cli
