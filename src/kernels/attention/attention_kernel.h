// src/kernels/attention/attention_kernel.h — internal: the interface between the attention
// op (attention.cpp: checks, path choice, autograd, reference) and its
// kernels, one file per algorithm (attention_gemm.h, attention_flash.h,
// attention_small.h, attention_decode.h), compiled once per instruction set
// (attention_avx512.cpp, attention_avx2.cpp, attention_portable.cpp) into a
// kernel table.
#pragma once

#include <algorithm>
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
  // Small path only: the forward's lane-interleaved copies of q (scaled), k,
  // v and the output, and with dropout its multipliers, kept for the
  // backward (attention_saved_size); or null.
  T* saved = nullptr;
  AttnMask mask;
  // Decode kernel only: batch row b of q reads row kv_rows[b] of k and v
  // (null: row b); or, where kv_key_rows (B, K) is set, its key c from row
  // kv_key_rows[b * K + c] (a beam search cache shared by indirection).
  const std::int64_t* kv_rows = nullptr;
  const std::int64_t* kv_key_rows = nullptr;
  // Decode kernel only: false keeps every row's keys on one thread (no
  // flash-decoding split, whose partial softmaxes sum in another order and
  // which depends on the number of rows): inside an ops BatchInvariant scope.
  bool split_keys = true;
  AttnDropout drop;
  double scale = 1.0;
  // Relative positions (tiled and decode kernels): query q of batch row b
  // sits at position pos(b, q) = (qstart ? qstart[b] : K - Q) + q, key c at
  // c; the score of head h gains bias[h * bias_row() + pos(b, q) - c + K - 1]
  // (bias null: nothing), rows bias_stride apart (0: 2K - 1, packed). Every
  // pos(b, q) lies in [0, K).
  const T* bias = nullptr;
  std::int64_t bias_stride = 0;
  const std::int64_t* qstart = nullptr;
  // Rotary (tiled and decode kernels): row t of rot_cos and rot_sin
  // (positions x D / 2) holds the angles of position t. rotary_q: each query
  // is turned by the angles of pos(b, q) before its products; rotary_k (tiled
  // kernels only): each key by those of its index. The gradients are turned
  // back: they are those of the unturned q and k.
  const T* rot_cos = nullptr;
  const T* rot_sin = nullptr;
  bool rotary_q = false, rotary_k = false;
  // Decode kernel only: query head h reads key and value head h / kv_group
  // (grouped-query attention; k and v hold H / kv_group heads).
  std::int64_t kv_group = 1;
  // backward
  HeadView<const T> dout;
  HeadView<T> dq, dk, dv;
  T* dbias = nullptr;  // (H, 2K - 1): the bias's gradient, written when bias and dbias are set
  std::int64_t bias_ld() const { return 2 * K - 1; }  // of dbias
  std::int64_t bias_row() const { return bias_stride > 0 ? bias_stride : bias_ld(); }
  std::int64_t query_pos0(std::int64_t b) const { return qstart ? qstart[b] : K - Q; }
};

// Tile sizes of the tiled (FlashAttention-2) kernels: Br queries (rounded up
// to a multiple of the vector width) by Bc keys; the forward's own where
// fwd_br, fwd_bc are set (its products have another register block).
struct AttnTiles {
  std::int64_t br = 0, bc = 0;
  std::int64_t fwd_br = 0, fwd_bc = 0;
  AttnTiles forward() const { return {fwd_br ? fwd_br : br, fwd_bc ? fwd_bc : bc, 0, 0}; }
};

// The algorithms; choose_attention_path (below) picks one per call, for attention.cpp.
enum class AttnPath {
  tiled,  // FlashAttention-2: query tiles x key tiles, online softmax (attention_flash.h)
  small,  // W heads at a time, one per vector lane (attention_small.h)
  decode,  // one query row per task, long caches split over keys (attention_decode.h)
};

// The small path's range: a few queries and keys per head (d2l's
// Transformer), where it beats the tiled kernels (measured in
// docs/design/attention.md; the kernel itself takes head dims up to 64).
// Without a gradient: head dims up to 8. With one: head dims up to 8, or up
// to 32 while a head's working set, Q K + (Q + K) max(D, Dv) elements per
// lane, stays within kSmallGradWork: past it the backward's per-key passes
// over every query's rows leave the L1 cache, and it falls behind the tiled
// kernels (size b's shape, 32 steps at head dim 32: 2.5x slower).
constexpr std::int64_t kSmallGradWork = 1200;

inline bool attention_small_problem(std::int64_t Q, std::int64_t K, std::int64_t D, std::int64_t Dv,
                                    bool need_grad) {
  if (Q > 64 || K > 64 || Q * K > 1024) return false;
  const std::int64_t d = std::max(D, Dv);
  if (d <= 8) return true;
  return need_grad && d <= 32 && Q * K + (Q + K) * d <= kSmallGradWork;
}

// The decode kernel serves inference with at most this many queries (a KV
// cache step, or a few): no gradient, no dropout.
constexpr std::int64_t kDecodeMaxQueries = 8;

// Every choice between the attention algorithms, in one place: inference
// with few queries decodes; small problems run heads across lanes when
// `small_allowed`; everything else is tiled.
inline AttnPath choose_attention_path(std::int64_t Q, std::int64_t K, std::int64_t D,
                                      std::int64_t Dv, bool need_grad, bool dropout,
                                      bool small_allowed) {
  if (!need_grad && !dropout && Q <= kDecodeMaxQueries) return AttnPath::decode;
  if (small_allowed && attention_small_problem(Q, K, D, Dv, need_grad)) return AttnPath::small;
  return AttnPath::tiled;
}

// Elements of AttnArgs::saved for a small problem on W lanes, with or
// without dropout: q, k, v, the output and the scores, and with dropout the
// multipliers.
inline std::int64_t attention_saved_size(std::int64_t N, std::int64_t Q, std::int64_t K,
                                         std::int64_t D, std::int64_t Dv, int W, bool dropout) {
  return (N + W - 1) / W * W * (Q * D + K * D + K * Dv + Q * Dv + Q * K + (dropout ? Q * K : 0));
}

// One instruction set's kernels for element type T. All of them require
// Q >= 1 and K >= 1; backward_small requires the buffers saved by
// forward_small (AttnArgs::saved) with the same table.
template <class T>
struct AttnKernelTable {
  const char* name;
  int width;  // vector lanes
  AttnTiles tiles;  // default tile sizes
  void (*forward)(const AttnArgs<T>&, AttnTiles);
  void (*backward)(const AttnArgs<T>&, AttnTiles);
  void (*forward_small)(const AttnArgs<T>&);
  void (*backward_small)(const AttnArgs<T>&);
  void (*decode)(const AttnArgs<T>&);
};

// The tiled kernels in bf16 (attention_avx512_bf16.cpp): every product's operands
// (q, k, v, dO and the tiles of P, W and dS) rounded to bf16 and multiplied
// pairwise into f32 sums by AVX-512 BF16; softmax, statistics and
// accumulators in f32. Null where the build lacks them; run them only where
// attn::bf16_supported().
using AttnTiledFn = void (*)(const AttnArgs<float>&, AttnTiles);
AttnTiledFn attention_forward_bf16();
AttnTiledFn attention_backward_bf16();

// The kernels per instruction set; null where the build cannot provide them.
const AttnKernelTable<float>* attention_kernels_avx512();
const AttnKernelTable<float>* attention_kernels_avx2();
const AttnKernelTable<float>* attention_kernels_portable_f32();
const AttnKernelTable<double>* attention_kernels_portable_f64();

}  // namespace attn::detail
