// Storage: 64-byte aligned buffers, with a cache of large freed blocks.
//
// glibc serves blocks over its mmap threshold with fresh pages, so every large
// op output would be page-faulted and zeroed by the kernel: that halves the
// speed of memory-bound ops. Freed blocks of 1 MiB or more are kept here by
// exact size (training repeats the same shapes every step) and handed out
// again, up to kCacheLimit bytes in all.
#include "attn/core/storage.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "attn/core/threads.h"

namespace attn {
namespace {

constexpr std::size_t kCacheMin = 1 << 20;
constexpr std::size_t kCacheLimit = std::size_t(1) << 30;

struct BlockCache {
  std::mutex mu;
  std::multimap<std::size_t, void*> free_blocks;
  std::size_t cached = 0;

  void* take(std::size_t size) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = free_blocks.find(size);
    if (it == free_blocks.end()) return nullptr;
    void* p = it->second;
    free_blocks.erase(it);
    cached -= size;
    return p;
  }
  bool give(std::size_t size, void* p) {
    std::lock_guard<std::mutex> lock(mu);
    if (cached + size > kCacheLimit) return false;
    free_blocks.emplace(size, p);
    cached += size;
    return true;
  }
  ~BlockCache() {
    for (auto& [_, p] : free_blocks) std::free(p);
  }
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache();  // never destroyed: tensors may outlive statics
  return *c;
}

std::size_t rounded_size(std::size_t nbytes) {
  std::size_t r = (nbytes + Storage::kAlignment - 1) / Storage::kAlignment * Storage::kAlignment;
  return r == 0 ? Storage::kAlignment : r;
}

}  // namespace

Storage::Storage(std::size_t nbytes) : nbytes_(nbytes) {
  static const bool threads_ready = (init_threads_from_env(), true);
  (void)threads_ready;
  std::size_t size = rounded_size(nbytes);
  if (size >= kCacheMin) data_ = cache().take(size);
  if (data_ == nullptr) data_ = std::aligned_alloc(kAlignment, size);
  if (data_ == nullptr) throw std::bad_alloc();
}

Storage::~Storage() {
  std::size_t size = rounded_size(nbytes_);
  if (size >= kCacheMin && cache().give(size, data_)) return;
  std::free(data_);
}

}  // namespace attn
