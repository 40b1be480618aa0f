// apps/attn/paths.h — the files attn ships with, found relative to the
// running program, so that a build tree or an installed tree can be moved.
//
//   installed   <prefix>/bin/attn
//               <prefix>/share/attn/datasets/fra-eng/fra.txt.gz
//               (the GNUInstallDirs bin and data directories, whatever they are)
//   build tree  <build>/attn
//               <build>/datasets/fra-eng/fra.txt.gz (CMake copies it there)
#pragma once

#include <filesystem>
#include <string>

namespace attn::cli {

// The directory that holds the running executable (/proc/self/exe, symbolic
// links resolved); empty when it cannot be read.
std::filesystem::path program_dir();

// The bundled English-French corpus (datasets/fra-eng/fra.txt.gz): the first
// of the installed and the build-tree location that exists; when neither
// does, the installed location, so that the error names the missing file.
std::string default_corpus();

}  // namespace attn::cli
