// src/ops/attention_kernel.h — internal: the interface between the attention
// op (attention.cpp: checks, autograd, reference) and its kernels
// (attention_impl.h, compiled once per instruction set).
#pragma once

#include <cstdint>

namespace attn::detail {

// A (B, H, T, d) operand read in place: element (b, h, t, i) lies at
// ptr[b * sb + h * sh + t * st + i]. The 3-D layout (N, T, d) is B = N, H = 1.
template <class T>
struct HeadView {
  T* ptr = nullptr;
  std::int64_t sb = 0, sh = 0, st = 0;
  T* row(std::int64_t b, std::int64_t h, std::int64_t t) const {
    return ptr + b * sb + h * sh + t * st;
  }
};

// Which keys query q of batch element b sees: k < len(b, q), the limits L of
// attn::attention_limits (attn/ops/attention.h), 0 meaning a uniform row over
// all K keys (d2l's fully masked row).
struct AttnMask {
  const std::int64_t* limits = nullptr;  // (B, Q), contiguous
  std::int64_t Q = 0;
  bool causal = false;  // only a hint: about half of the scores are masked
  std::int64_t len(std::int64_t b, std::int64_t q) const { return limits[b * Q + q]; }
};

// Dropout on the attention weights: element i = ((b * H + h) * Q + q) * K + k
// is kept iff (philox word i of (seed, offset)) >> 8 >= threshold.
struct AttnDropout {
  bool on = false;
  std::uint64_t seed = 0, offset = 0;
  std::uint32_t threshold = 0;
  double scale = 1.0;  // 1 / (1 - p)
};

template <class T>
struct AttnArgs {
  std::int64_t B = 0, H = 0, Q = 0, K = 0, D = 0, Dv = 0;
  HeadView<const T> q, k, v;
  HeadView<T> o;  // forward output (written), or the saved output (backward)
  T* lse = nullptr;  // (B * H, Q) log-sum-exp of the scores; written when not null
  // Small problems only: the forward's lane-interleaved copies of q (scaled),
  // k, v and the output, kept for the backward (attention_saved_size); or null.
  T* saved = nullptr;
  AttnMask mask;
  AttnDropout drop;
  double scale = 1.0;
  // backward
  HeadView<const T> dout;
  HeadView<T> dq, dk, dv;
};

// Tile sizes: Br queries (a multiple of the vector width) by Bc keys; and
// whether small problems (a few queries and keys per head) may run W heads at
// a time, one per vector lane, instead of tiled.
struct AttnTiles {
  std::int64_t br = 0, bc = 0;
  bool small = true;
};

// Small problems (a few queries and keys per head, d2l's Transformer) run W
// heads at a time, one per vector lane, when AttnTiles::small allows it.
inline bool attention_small_problem(std::int64_t Q, std::int64_t K, std::int64_t D, std::int64_t Dv,
                                    bool allowed) {
  return allowed && Q <= 64 && K <= 64 && Q * K <= 1024 && D <= 64 && Dv <= 64;
}

// Elements of AttnArgs::saved for a small problem on W lanes.
inline std::int64_t attention_saved_size(std::int64_t N, std::int64_t Q, std::int64_t K,
                                         std::int64_t D, std::int64_t Dv, int W) {
  return (N + W - 1) / W * W * (Q * D + K * D + K * Dv + Q * Dv);
}

template <class T>
struct AttnKernelTable {
  const char* name;
  int width;  // vector lanes
  AttnTiles tiles;  // defaults
  void (*forward)(const AttnArgs<T>&, AttnTiles);
  void (*backward)(const AttnArgs<T>&, AttnTiles);
  void (*decode)(const AttnArgs<T>&);
};

// The kernels per instruction set; null where the build cannot provide them.
const AttnKernelTable<float>* attention_kernels_avx512();
const AttnKernelTable<float>* attention_kernels_avx2();
const AttnKernelTable<float>* attention_kernels_portable_f32();
const AttnKernelTable<double>* attention_kernels_portable_f64();

// Testing and benchmarking switches (attention.cpp). The instruction set the
// f32 kernels use: "avx512", "avx2", "portable", or "" for the best the CPU
// supports; returns false (and changes nothing) if that one is unavailable.
bool set_attention_isa(const char* name);
const char* attention_isa();
// Tile sizes (0: the kernel's default). br is rounded up to the vector width.
void set_attention_tiles(std::int64_t br, std::int64_t bc);
// Whether small problems take the heads-across-lanes path (default on); off,
// every problem runs tiled.
void set_attention_small_path(bool on);

}  // namespace attn::detail
