// libFuzzer target: fuzz/entries.h's corpus() on every input.
#include <cstdio>
#include <cstdlib>

#include "entries.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    attn::fuzz::corpus(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const attn::fuzz::Finding& e) {
    std::fprintf(stderr, "finding: %s\n", e.what());
    std::abort();
  }
  return 0;
}
