// src/kernels/attention/attention_table.h — internal: one instruction set's attention
// kernel table, assembled from the four algorithms. Included by the per-ISA
// translation units (attention_portable.cpp, attention_avx2.cpp,
// attention_avx512.cpp) after their target pragma; see attention_common.h.
//
//   attention_gemm.h    the register-blocked tile product and operand packing
//   attention_transpose.h  W rows to W lanes and back (small path, query tiles)
//   attention_flash.h   FlashAttention-2 forward and backward over tiles
//   attention_small.h   small problems: W heads at a time across the lanes
//   attention_decode.h  a few queries against a KV cache, split over keys
#pragma once

#include "kernels/attention/attention_decode.h"
#include "kernels/attention/attention_flash.h"
#include "kernels/attention/attention_small.h"

namespace attn::detail {
namespace {

template <class V>
AttnKernelTable<typename V::T> make_attention_kernels(const char* name, AttnTiles tiles) {
  return AttnKernelTable<typename V::T>{name,
                                        V::W,
                                        tiles,
                                        &FlashAttention<V>::forward,
                                        &FlashAttention<V>::backward,
                                        &SmallAttention<V>::forward,
                                        &SmallAttention<V>::backward,
                                        &DecodeAttention<V>::decode};
}

}  // namespace
}  // namespace attn::detail
