// attn/io/digest.h — SHA-256, for the model manifest and checkpoints.
//
// SHA-256 rather than a faster non-cryptographic hash: a user can check a
// model directory's manifest with `sha256sum`, and tools in any language can
// write one (docs/model-format.md). It ran at about 2 GB/s on an AMD EPYC Zen 5 (OpenSSL's
// libcrypto, SHA extensions), small beside reading and parsing the weights.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace attn::io {

// Incremental SHA-256: update() any number of times, then hex() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, std::size_t size);
  void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }
  // Lower-case hex of the 32-byte digest; ends the computation.
  std::string hex();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// SHA-256 of `bytes`, lower-case hex (as sha256sum prints it).
std::string sha256_hex(std::string_view bytes);

}  // namespace attn::io
