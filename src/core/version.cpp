#include "attn/version.h"

namespace attn {

const char* version() { return ATTN_VERSION_STRING; }

const char* compiled_for() {
#if defined(__x86_64__) && defined(__AVX512F__)
  return "x86-64 with AVX-512";
#elif defined(__x86_64__) && defined(__AVX2__)
  return "x86-64 with AVX2";
#elif defined(__x86_64__)
  return "any x86-64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "this architecture";
#endif
}

}  // namespace attn
