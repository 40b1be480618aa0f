// attn/core/storage.h — a reference-counted, 64-byte aligned buffer.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace attn {

class Storage {
 public:
  static constexpr std::size_t kAlignment = 64;

  // Uninitialized buffer of `nbytes` bytes (at least one cache line).
  explicit Storage(std::size_t nbytes);
  // The `nbytes` bytes at `data`, which belong to someone else (a NumPy
  // array, through the Python module's buffer protocol): nothing is
  // allocated or copied, and `release` is called once, when this Storage is
  // destroyed, on whichever thread drops the last handle. `data` need only be
  // aligned to its elements (ops read any layout). Not counted in
  // storage_stats().
  Storage(void* data, std::size_t nbytes, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  std::size_t capacity_ = 0;  // the block's size in the allocator (>= nbytes_)
  std::function<void()> release_;  // set for memory that belongs to someone else
};

// The bytes held by live Storage buffers (the sizes asked for; blocks kept
// in the allocator's caches are not counted), over all threads, and the most
// held at once since the last reset_storage_peak(): what the tensors of a
// computation occupy at its high point.
struct StorageStats {
  std::size_t live_bytes = 0;
  std::size_t peak_bytes = 0;
};
StorageStats storage_stats();
// Lowers the peak to the bytes live now, so that peak_bytes - live_bytes
// read before a computation is what it added at its high point.
void reset_storage_peak();

}  // namespace attn
