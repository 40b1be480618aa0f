// attn/core/storage.h — a reference-counted, 64-byte aligned buffer.
#pragma once

#include <cstddef>
#include <memory>

namespace attn {

class Storage {
 public:
  static constexpr std::size_t kAlignment = 64;

  // Uninitialized buffer of `nbytes` bytes (at least one cache line).
  explicit Storage(std::size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
};

}  // namespace attn
