#include "attn/core/storage.h"

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "testing.h"

using namespace attn;

// The counters follow the bytes of live tensors, whichever cache a block
// comes from, and the peak keeps the high mark until it is reset.
TEST(StorageStats, LiveAndPeakBytes) {
  const StorageStats before = storage_stats();
  reset_storage_peak();
  EXPECT_EQ(storage_stats().peak_bytes, before.live_bytes);
  {
    Tensor small = Tensor::empty({10}, DType::f32);  // the small-block cache
    Tensor large = Tensor::empty({1 << 20}, DType::f32);  // the large-block cache
    EXPECT_EQ(storage_stats().live_bytes, before.live_bytes + 40 + (4u << 20));
    {
      Tensor mid = Tensor::empty({3, 1000}, DType::f64);
      EXPECT_EQ(storage_stats().live_bytes, before.live_bytes + 40 + (4u << 20) + 24000);
    }
    EXPECT_EQ(storage_stats().live_bytes, before.live_bytes + 40 + (4u << 20));
    // Views share their storage: nothing new.
    Tensor view = large.narrow(0, 5, 10);
    EXPECT_EQ(storage_stats().live_bytes, before.live_bytes + 40 + (4u << 20));
  }
  EXPECT_EQ(storage_stats().live_bytes, before.live_bytes);
  EXPECT_EQ(storage_stats().peak_bytes, before.live_bytes + 40 + (4u << 20) + 24000);
  reset_storage_peak();
  EXPECT_EQ(storage_stats().peak_bytes, before.live_bytes);
  // A block reused from the cache counts again.
  { Tensor again = Tensor::empty({1 << 20}, DType::f32); }
  EXPECT_EQ(storage_stats().peak_bytes, before.live_bytes + (4u << 20));
}

TEST(StorageStats, CountsOverThreads) {
  const std::size_t before = storage_stats().live_bytes;
  std::vector<Tensor> kept(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&kept, i] {
      for (int r = 0; r < 1000; ++r) Tensor::empty({100 + r % 7}, DType::f32);
      kept[i] = Tensor::empty({1000}, DType::f64);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(storage_stats().live_bytes, before + 4 * 8000);
  kept.clear();
  EXPECT_EQ(storage_stats().live_bytes, before);
}

// A freed large block serves a later request of between half its size and
// its size (decoding's shapes shrink and grow a little every step), the
// smallest such block first, and never a request of less than half its size.
// (Under AddressSanitizer the caches are off and every block is new.)
TEST(StorageCache, LargeBlocksServeRequestsOfAtLeastHalfTheirSize) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the block caches are off under AddressSanitizer";
#else
  const std::size_t big = std::size_t(7) << 20, bigger = std::size_t(9) << 20;
  void* p_big = nullptr;
  void* p_bigger = nullptr;
  {
    Storage a(big), b(bigger);
    p_big = a.data();
    p_bigger = b.data();
  }
  {
    Storage smaller(big - (big / 4));  // fits both; the smaller block first
    EXPECT_EQ(smaller.data(), p_big);
    Storage next(big - (big / 4));
    EXPECT_EQ(next.data(), p_bigger);
  }
  {
    // Both blocks are back; a request below half of each takes neither.
    Storage tiny(big / 2 - 4096);
    EXPECT_NE(tiny.data(), p_big);
    EXPECT_NE(tiny.data(), p_bigger);
    // A block handed out for a smaller size goes back under its own size:
    // the full size finds it again.
    Storage full(bigger);
    EXPECT_EQ(full.data(), p_bigger);
  }
#endif
}

// Blocks of 2 MiB or more start on a 2 MiB boundary and span whole 2 MiB
// pages (marked for transparent huge pages); smaller ones keep the 64-byte
// alignment. (Under AddressSanitizer every block is a plain one.)
TEST(StorageCache, LargeBlocksAreWholeHugePages) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the block caches are off under AddressSanitizer";
#else
  constexpr std::uintptr_t kHuge = std::uintptr_t(2) << 20;
  for (std::size_t mib : {2, 3, 5}) {
    Storage s((mib << 20) + 100);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.data()) % kHuge, 0u) << mib << " MiB";
    std::memset(s.data(), 1, s.nbytes());  // all of it is usable
  }
  Storage small(std::size_t(1) << 20);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small.data()) % Storage::kAlignment, 0u);
#endif
}

// Memory that belongs to someone else (a NumPy array): used in place, never
// counted or freed, and handed back once, when the last view of it goes.
TEST(StorageExternal, UsedInPlaceAndReleasedOnceByTheLastView) {
  std::vector<float> buffer = {1, 2, 3, 4, 5, 6};
  int released = 0;
  const StorageStats before = storage_stats();
  {
    auto storage = std::make_shared<Storage>(buffer.data(), buffer.size() * sizeof(float),
                                             [&released] { ++released; });
    EXPECT_EQ(storage->data(), buffer.data());
    EXPECT_EQ(storage->nbytes(), 24u);
    Tensor t = Tensor::make_view(storage, {2, 3}, {3, 1}, 0, DType::f32);
    storage.reset();
    Tensor column = t.select(1, 1);  // a view: the same memory
    EXPECT_EQ(to_vector<float>(column), (std::vector<float>{2, 5}));
    fill_(column, 9);
    EXPECT_EQ(buffer[4], 9.0f);
    EXPECT_EQ(storage_stats().live_bytes, before.live_bytes);
    t = Tensor();
    EXPECT_EQ(released, 0);  // `column` still holds it
  }
  EXPECT_EQ(released, 1);
}
