// attn/ops/attention.h — scaled dot-product attention, fused (FlashAttention-2
// style, the (Q x K) scores never stored) and materialized (the reference).
//
// Layouts (q, k, v all of the same rank; any strides, but the last dim must
// have stride 1, else it is copied once):
//   3-D  q (N, Q, D), k (N, K, D), v (N, K, Dv)          N = batch * heads: d2l's
//        layout after transpose_qkv. Output (N, Q, Dv).
//   4-D  q (B, Q, H, D), k (B, K, H, D), v (B, K, H, Dv)  a Linear's output
//        (B, T, H * D) reshaped, read in place. Output (B, Q, H, Dv),
//        contiguous, so it reshapes to (B, Q, H * Dv) without a copy.
// Dv may differ from D; D must be at least 1. f32 or f64 (all three the same).
// Grouped-query attention (4-D only): k and v may have fewer heads Hk, a
// divisor of H; query head h then attends key and value head h / (H / Hk).
// The decode kernel reads them so; the others repeat them per query head
// (repeat_interleave, differentiable).
//
// Semantics are d2l's DotProductAttention:
//   scores  S = scale * q k^T                  (scale = 1 / sqrt(D) by default)
//   weights A = masked_softmax(S, lens)        masked scores are replaced by -1e6
//   out       = dropout(A) v
// Query q of row n sees keys k < L(n, q), where
//   L = min(valid_lens[n] or valid_lens[n, q]   (K when valid_lens is undefined),
//           q + 1 + (K - Q) clamped to [0, K]   (only when causal; for Q == K
//                                                 this is d2l's dec_valid_lens 1..T))
// In the 4-D layout valid_lens is indexed by the batch element b and shared by
// the H heads. As in d2l, a row with L = 0 (every score masked to the same
// value) gets uniform weights 1/K over all K keys, so its output is the mean
// of the values, never NaN; masked weights of other rows are exactly 0. The
// gradient with respect to a masked score (and to every score of a row with
// L = 0) is 0. valid_lens: (N) or (N, Q) in 3-D, (B) or (B, Q) in 4-D, any
// dtype (a fractional length l means k < ceil(l)), every value in [0, K].
//
// Dropout (training and dropout > 0) drops attention weights exactly as
// ops dropout on the (N = B * H, Q, K) weights tensor would, with the same
// generator: element ((b * H + h) * Q + q) * K + k is kept iff its Philox
// uniform at offset gen.reserve(N * Q * K) is >= p, and kept weights are
// scaled by 1 / (1 - p). The fused kernel regenerates the mask per tile in the
// forward and in the backward (nothing stored). p == 1 gives zeros; p == 0 or
// !training reserves nothing. Q == 0 gives an empty output, K == 0 zeros.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attn/core/rng.h"
#include "attn/core/tensor.h"

namespace attn {

struct AttentionOptions {
  Tensor valid_lens;  // undefined: no length mask
  bool causal = false;
  double dropout = 0.0;  // on the attention weights, in [0, 1]; used only when training
  bool training = true;
  Generator* generator = nullptr;  // nullptr: default_generator()
  double scale = 0.0;  // 0: 1 / sqrt(D)
  // 4-D only: (B) or (B, K) integers, or undefined. (B): batch row b of q
  // attends the keys and values of row kv_rows[b] of k and v, which may have
  // any number of rows (every entry in [0, k.size(0))). (B, K): its key and
  // value c are key and value c of row kv_rows[b, c]. valid_lens stays per
  // row of q. Beam search uses (B) so that the beams of a sentence share one
  // copy of its encoder side, and (B, K) so that they share the cache of
  // their common prefix (no rows copied when beams are pruned). The decode
  // kernel reads the rows in place; every other path gathers them first
  // (index_select, differentiable).
  Tensor kv_rows;
  // Relative positions (attn/ops/positions.h builds the biases). Query q of
  // batch row b sits at position P(b, q) = query_start[b] + q, or K - Q + q
  // when query_start is undefined (the queries are the last Q of the keys'
  // positions, as the causal rule has them); key k sits at position k.
  // position_bias: (H, 2K - 1) in 4-D, (1, 2K - 1) in 3-D, q's dtype, or
  // undefined: the score of head h, query q and key k gains
  // position_bias[h, P(b, q) - k + K - 1], before the mask. Differentiable
  // (its gradient sums the scores' gradients by offset). query_start: (B)
  // integers, every P(b, q) in [0, K).
  Tensor position_bias;
  Tensor query_start;
  // Rotary positions (ops/positions.h's rotary_heads), inside the kernels:
  // each query turned by the angles of P(b, q) (rotary_queries), each key by
  // those of its index (rotary_keys; a cache whose keys were turned when
  // written needs only the queries'), theta_i = rotary_base^(-2i / D), D
  // even. The gradients are those of the unturned q and k.
  bool rotary_queries = false, rotary_keys = false;
  double rotary_base = 10000.0;
};

// The valid-lengths rule above as numbers, the one place it is computed:
// L(b, q) for every batch row b < B and query q < Q, as a contiguous i64
// tensor (B, Q). valid_lens: undefined (L = K), (B) or (B, Q), any dtype,
// every value finite and in [0, K], a fractional l counting as ceil(l);
// causal: the minimum with q + 1 + (K - Q) clamped to [0, K]. B is the first
// dim of the layout that valid_lens indexes (N in 3-D, B in 4-D). Errors name
// `op`: a ShapeError for another shape, a ValueError for a value outside
// [0, K]. Every attention path and masked_softmax_lengths take their masks
// from here.
Tensor attention_limits(const Tensor& valid_lens, bool causal, std::int64_t B, std::int64_t Q,
                        std::int64_t K, const char* op = "attention_limits");

// The fused op. It picks one of three kernels, none of which stores the
// (Q x K) weights:
//   decode  no gradient (nothing requires one, or a no-grad guard), no active
//           dropout, and at most 8 queries: attention_decode below.
//   small   at most 64 queries and keys (and Q K <= 1024), head dims <= 32
//           with a gradient, <= 8 without, no position bias or rotary:
//           several heads at a time, one per vector lane.
//   tiled   otherwise: online softmax over key tiles, the per-row
//           log-sum-exp saved for the backward (FlashAttention-2, ref: Dao,
//           arXiv 2307.08691).
// The three agree to rounding (the order of floating-point sums differs).
// In a bf16 PrecisionScope (attn/ops/precision.h) with the AVX-512 kernels,
// the tiled kernel's products, forward and backward, take bf16 operands (q,
// k, v, the output's gradient and the weight tiles rounded to bf16) with f32
// sums; the softmax and its statistics stay f32. The small and decode
// kernels, and the tiled ones with a position bias or rotary, stay f32.
// Memory O(N Q + N K) besides the inputs and output. Differentiable in q, k, v.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& opt = {});

// The materialized path, d2l's formulation with the ops of this library
// (autograd through them): scores = bmm(q, k^T) / sqrt(D) (times opt.scale
// instead when it is set), weights = masked_softmax(scores, L), output =
// bmm(dropout(weights), v). `weights` is (N, Q, K) — (B * H, Q, K) in 4-D,
// d2l's transpose_qkv order —, before dropout, still in the graph.
struct MaterializedAttention {
  Tensor output;
  Tensor weights;
};
MaterializedAttention scaled_dot_product_attention_materialized(const Tensor& q, const Tensor& k,
                                                                const Tensor& v,
                                                                const AttentionOptions& opt = {});

// The reference the fast kernels are checked against: the materialized path's
// output. Same arguments and result as scaled_dot_product_attention.
Tensor scaled_dot_product_attention_reference(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const AttentionOptions& opt = {});

// Inference for a few new queries against a KV cache: q (B, Tq, H, D) or
// (N, Tq, D), usually Tq = 1; k, v the cache (B, Tk, H, D) / (N, Tk, D), e.g.
// a narrow() of a larger buffer along T. Same masks as above (causal: query i
// sees keys < i + 1 + Tk - Tq). No autograd, no dropout (dropout > 0 with
// training is a ValueError). Long caches with few heads are split over keys
// and the partial softmaxes combined (flash-decoding).
Tensor attention_decode(const Tensor& q, const Tensor& k, const Tensor& v,
                        const AttentionOptions& opt = {});

// Which kernels the f32 attention ops run, for tests and benchmarks; by
// default the instruction set named by the environment variable ATTN_ISA
// (avx512, avx2 or portable) when it is set, else the best this CPU has, the
// small path on and each kernel's own tile sizes. Process-wide; set it while
// no attention op runs on another thread. f64 always runs portable vectors.
//
// ATTN_ISA is read once, by the first attention op or call below; an unknown
// name, or a set this CPU lacks, makes that call (and every later one, until
// a set is chosen here) throw ValueError naming ATTN_ISA. oneDNN's matrix
// products choose their own instruction set (oneDNN's DNNL_MAX_CPU_ISA caps it).
struct AttentionKernelConfig {
  std::string isa;  // "avx512", "avx2" or "portable"; "": the default (ATTN_ISA, else the best)
  bool small_path = true;  // false: small problems run the tiled kernels too
  std::int64_t tile_queries = 0, tile_keys = 0;  // 0: the kernels' defaults;
                                                 // queries round up to the vector width
};
// Throws ValueError (and changes nothing) for an unknown instruction set or
// one this CPU lacks, or a negative tile size.
void set_attention_kernel_config(const AttentionKernelConfig& config);
// The current setting; isa names the set in use, never "".
AttentionKernelConfig attention_kernel_config();
// The instruction sets this CPU can run, best first; "portable" always.
std::vector<std::string> attention_isas();

}  // namespace attn
