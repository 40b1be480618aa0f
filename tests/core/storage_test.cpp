#include "attn/core/storage.h"

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
