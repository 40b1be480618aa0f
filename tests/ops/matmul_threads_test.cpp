// Matrix products under load: their bits depend on the shape and the thread
// count only (src/ops/row_blocks.h).
#include <algorithm>
#include <vector>

#include "attn/core/threads.h"
#include "attn/ops/matmul.h"
#include "attn/ops/precision.h"
#include "core/contention.h"
#include "testing.h"

using namespace attn;
using attn::testing::rand32;
using attn::testing::same_bits;

namespace {

// Fixes the adaptive thread check for a scope: the grain scale at `scale`
// (1: products from kSerialGemmWork on get the team; 1024: every product
// would run alone if the load decided it), the busy check off.
class LoadScope {
 public:
  explicit LoadScope(std::int64_t scale)
      : adaptive_(detail::set_adaptive_threads(false)), scale_(detail::set_grain_scale(scale)) {}
  ~LoadScope() {
    detail::set_grain_scale(scale_);
    detail::set_adaptive_threads(adaptive_);
  }
  LoadScope(const LoadScope&) = delete;
  LoadScope& operator=(const LoadScope&) = delete;

 private:
  bool adaptive_;
  std::int64_t scale_;
};

}  // namespace

// A product's bits depend on its shape and the thread count, never on the
// load (the cores busy with other processes, or far apart: fork_ok and
// grain_scale in attn/core/threads.h), or training would give another model
// on a busy machine. oneDNN's products do depend on their team: on AVX2,
// dnnl_sgemm splits the sums of narrow products between two threads (64 x
// 1280 x 64 with a transposed, the weight gradient of a 64-wide layer over
// 1,280 tokens, and 1280 x 64 x 64 with b transposed, its forward), so
// products from kSerialGemmWork on keep the team. The cases: a Transformer
// step's products at sizes b and c of bench/scale_sweep.py (sums of 2,048
// tokens), narrow ones, odd ones, batches, on the sgemm and primitive paths,
// f32 and bf16.
TEST(Matmul, SameBitsWhateverTheLoad) {
  struct Case {
    std::int64_t m, k, n;
    bool ta, tb;
  };
  const std::vector<Case> cases = {{2048, 256, 1024, false, false}, {2048, 1024, 256, false, false},
                                   {256, 2048, 1024, true, false},  {1024, 512, 2048, false, false},
                                   {512, 1024, 2048, true, false},  {64, 1280, 64, true, false},
                                   {1280, 64, 64, false, true},     {32, 8192, 32, true, false},
                                   {128, 2048, 48, true, false},    {4096, 64, 32, false, true},
                                   {2048, 64, 256, false, true},    {101, 4099, 37, true, true},
                                   {640, 32, 214, false, false},    {32, 640, 214, true, false}};
  const int threads = get_num_threads();
  set_num_threads(std::max(2, threads));
  for (bool bf16 : {false, true}) {
    if (bf16 && !bf16_supported()) continue;
    PrecisionScope precision(bf16 ? Precision::bf16 : Precision::f32);
    std::uint64_t seed = 1;
    for (const Case& c : cases) {
      Tensor a = c.ta ? rand32({c.k, c.m}, seed).transpose(0, 1) : rand32({c.m, c.k}, seed);
      Tensor b = c.tb ? rand32({c.n, c.k}, seed + 1).transpose(0, 1) : rand32({c.k, c.n}, seed + 1);
      seed += 2;
      Tensor team, alone;
      {
        LoadScope load(1);
        team = matmul(a, b);
      }
      {
        LoadScope load(1024);
        alone = matmul(a, b);
      }
      EXPECT_TRUE(same_bits(team, alone))
          << c.m << " x " << c.k << " x " << c.n << (c.ta ? " (a transposed)" : "")
          << (c.tb ? " (b transposed)" : "") << (bf16 ? " bf16" : " f32");
    }
    for (const Shape& s : {Shape{64, 8, 10, 32}, Shape{16, 8, 64, 64}, Shape{8, 4, 300, 64}}) {
      Tensor q = rand32(s, seed++), k = rand32(s, seed++);
      Tensor team, alone;
      {
        LoadScope load(1);
        team = matmul(q, k.transpose(2, 3));
      }
      {
        LoadScope load(1024);
        alone = matmul(q, k.transpose(2, 3));
      }
      EXPECT_TRUE(same_bits(team, alone)) << shape_str(s) << (bf16 ? " bf16" : " f32");
    }
  }
  set_num_threads(threads);
}
