#include "attn/io/digest.h"

#include <openssl/evp.h>

#include "attn/core/error.h"

namespace attn::io {

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
  bool done = false;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  ATTN_CHECK(state_->ctx != nullptr && EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) == 1,
             InternalError, "Sha256: cannot start a SHA-256 computation (libcrypto)");
}

Sha256::~Sha256() { EVP_MD_CTX_free(state_->ctx); }

void Sha256::update(const void* data, std::size_t size) {
  ATTN_CHECK(!state_->done, InternalError, "Sha256::update after hex()");
  ATTN_CHECK(EVP_DigestUpdate(state_->ctx, data, size) == 1, InternalError,
             "Sha256::update: libcrypto failed");
}

std::string Sha256::hex() {
  ATTN_CHECK(!state_->done, InternalError, "Sha256::hex called twice");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  ATTN_CHECK(EVP_DigestFinal_ex(state_->ctx, md, &n) == 1 && n == 32, InternalError,
             "Sha256::hex: libcrypto failed");
  state_->done = true;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(64, '0');
  for (unsigned i = 0; i < 32; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex();
}

}  // namespace attn::io
