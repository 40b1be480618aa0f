#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <filesystem>
#include <string>

#include "attn/core/error.h"
#include "attn/core/rng.h"
#include "attn/io/atomic_file.h"
#include "examples.h"

namespace attn::examples {

std::string figure_path(const Options& o, const std::string& name) {
  io::ensure_directory(o.out_dir);
  return (std::filesystem::path(o.out_dir) / name).string();
}

int run_main(int argc, char** argv, int (*section)(const Options&)) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--out" || a == "--seed") && i + 1 < argc) {
      std::string v = argv[++i];
      if (a == "--out") {
        o.out_dir = v;
      } else {
        try {
          std::size_t used = 0;
          o.seed = std::stoull(v, &used);
          if (used != v.size() || v[0] == '-') throw std::invalid_argument(v);
        } catch (const std::exception&) {
          fmt::print(stderr, "error: --seed expects a non-negative integer, got '{}'\n", v);
          return 2;
        }
      }
    } else {
      fmt::print(stderr, "usage: {} [--out DIR] [--seed N]\n", argv[0]);
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  try {
    manual_seed(o.seed);
    return section(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace attn::examples
