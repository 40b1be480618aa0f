// Storage: 64-byte aligned buffers, with caches of freed blocks.
//
// Large blocks: glibc serves blocks over its mmap threshold with fresh pages,
// so every large op output would be page-faulted and zeroed by the kernel:
// that halves the speed of memory-bound ops. Freed blocks of more than 64 KiB
// are kept here, up to kCacheLimit bytes in all, and handed out again for
// requests of at least half their size, the smallest fit first (training
// repeats the same shapes every step and gets exact fits; decoding's shapes
// change a little every step).
//
// Small blocks: a decoding step makes a few hundred tensors of a few hundred
// bytes each, and glibc's aligned malloc and free (with the consolidation of
// its fast bins) cost more than the arithmetic. Blocks of up to kSmallMax
// bytes are rounded up to a power of two and kept on per-thread free lists,
// up to kSmallLimit bytes per thread; a block freed by another thread than
// the one that made it simply joins that thread's lists.
//
// Huge pages: on an AMD EPYC Zen 5 VM the kernel took about 17 us to fault in
// a page of 4 KiB, and a decoding run touches hundreds of MiB of fresh memory
// as its caches warm up: blocks of 2 MiB or more are allocated in whole,
// aligned 2 MiB pages and marked for transparent huge pages (madvise), one
// fault per 2 MiB where the kernel allows it (transparent_hugepage "madvise"
// or "always"), and simply 4 KiB pages where not.
//
// Every buffer's requested size is added to a live-bytes counter (one relaxed
// atomic each way) whose high mark storage_stats() reports.
//
// Under AddressSanitizer both caches are off, so that a use of a freed
// buffer is still reported.
#include "attn/core/storage.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include <sys/mman.h>

#include "attn/core/threads.h"

namespace attn {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCaching = false;
#else
constexpr bool kCaching = true;
#endif

constexpr std::size_t kCacheMin = (std::size_t(1) << 16) + 1;
constexpr std::size_t kHugePage = std::size_t(2) << 20;
constexpr std::size_t kCacheLimit = std::size_t(1) << 30;

struct BlockCache {
  std::mutex mu;
  std::multimap<std::size_t, void*> free_blocks;
  std::size_t cached = 0;

  // The smallest kept block of at least `size` bytes and at most twice that
  // (its size into `capacity`), or null. Training asks for the same sizes
  // every step and gets exact fits; decoding's sizes change a little every
  // step (rows leave, caches grow), and blocks kept only for an exact fit
  // would pile up to kCacheLimit while every new size took fresh pages.
  void* take(std::size_t size, std::size_t& capacity) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = free_blocks.lower_bound(size);
    if (it == free_blocks.end() || it->first / 2 > size) return nullptr;
    void* p = it->second;
    capacity = it->first;
    free_blocks.erase(it);
    cached -= capacity;
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

constexpr std::size_t kSmallMax = std::size_t(1) << 16;
constexpr std::size_t kSmallLimit = std::size_t(16) << 20;
constexpr int kSmallClasses = 11;  // 64 B .. 64 KiB

// Per-thread lists of free small blocks, one per power-of-two size class. The
// state is plain data reached through a pointer, so a Storage destroyed after
// the thread's destructors ran (a static tensor) still finds it: `closed`
// then sends its block straight back to the heap.
struct SmallCache {
  std::vector<void*> lists[kSmallClasses];
  std::size_t cached = 0;
};
thread_local SmallCache* t_small = nullptr;
thread_local bool t_small_closed = false;

struct SmallCacheOwner {
  ~SmallCacheOwner() {
    if (t_small != nullptr) {
      for (auto& list : t_small->lists)
        for (void* p : list) std::free(p);
      delete t_small;
      t_small = nullptr;
    }
    t_small_closed = true;
  }
};
thread_local SmallCacheOwner t_small_owner;

int small_class(std::size_t size) {  // size in (0, kSmallMax]
  int c = 0;
  while ((Storage::kAlignment << c) < size) ++c;
  return c;
}

SmallCache* small_cache() {
  if (t_small == nullptr && !t_small_closed) {
    (void)&t_small_owner;  // constructs the owner, which frees the lists at thread exit
    t_small = new SmallCache();
  }
  return t_small;
}

std::size_t rounded_size(std::size_t nbytes) {
  std::size_t r = (nbytes + Storage::kAlignment - 1) / Storage::kAlignment * Storage::kAlignment;
  return r == 0 ? Storage::kAlignment : r;
}

std::atomic<std::size_t> g_live_bytes{0};
std::atomic<std::size_t> g_peak_bytes{0};

void count_alloc(std::size_t nbytes) {
  const std::size_t live = g_live_bytes.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  std::size_t peak = g_peak_bytes.load(std::memory_order_relaxed);
  while (live > peak &&
         !g_peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {}
}

}  // namespace

StorageStats storage_stats() {
  return {g_live_bytes.load(std::memory_order_relaxed),
          g_peak_bytes.load(std::memory_order_relaxed)};
}

void reset_storage_peak() {
  g_peak_bytes.store(g_live_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

Storage::Storage(std::size_t nbytes) : nbytes_(nbytes) {
  static const bool threads_ready = (init_threads_from_env(), true);
  (void)threads_ready;
  std::size_t size = rounded_size(nbytes);
  if (!kCaching) {
    // plain aligned_alloc below
  } else if (size <= kSmallMax) {
    const int c = small_class(size);
    SmallCache* sc = small_cache();
    if (sc != nullptr && !sc->lists[c].empty()) {
      data_ = sc->lists[c].back();
      sc->lists[c].pop_back();
      sc->cached -= Storage::kAlignment << c;
      capacity_ = Storage::kAlignment << c;
      count_alloc(nbytes_);
      return;
    }
    size = Storage::kAlignment << c;
  } else if (size >= kCacheMin) {
    data_ = cache().take(size, capacity_);
  }
  if (data_ == nullptr && kCaching && size >= kHugePage) {
    size = (size + kHugePage - 1) / kHugePage * kHugePage;
    data_ = std::aligned_alloc(kHugePage, size);
    if (data_ != nullptr) {
      (void)madvise(data_, size, MADV_HUGEPAGE);  // a hint: 4 KiB pages where refused
      capacity_ = size;
    }
  }
  if (data_ == nullptr) {
    data_ = std::aligned_alloc(kAlignment, size);
    capacity_ = size;
  }
  if (data_ == nullptr) throw std::bad_alloc();
  count_alloc(nbytes_);
}

Storage::Storage(void* data, std::size_t nbytes, std::function<void()> release)
    : data_(data), nbytes_(nbytes), release_(std::move(release)) {
  static const bool threads_ready = (init_threads_from_env(), true);
  (void)threads_ready;
}

Storage::~Storage() {
  if (release_) {
    release_();
    return;
  }
  g_live_bytes.fetch_sub(nbytes_, std::memory_order_relaxed);
  const std::size_t size = capacity_;
  if (!kCaching) {
    // plain free below
  } else if (size <= kSmallMax) {
    const int c = small_class(size);
    SmallCache* sc = small_cache();
    if (sc != nullptr && sc->cached + (Storage::kAlignment << c) <= kSmallLimit) {
      sc->lists[c].push_back(data_);
      sc->cached += Storage::kAlignment << c;
      return;
    }
  } else if (size >= kCacheMin && cache().give(size, data_)) {
    return;
  }
  std::free(data_);
}

}  // namespace attn
