// src/ops/onednn_isa.h — internal: what oneDNN's kernels may use on this CPU.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace attn::detail {

// True when oneDNN's effective ISA (the CPU's, capped by
// ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA) includes `isa`: the ISAs nest as
// bit masks, each holding those below it.
inline bool onednn_isa_has(dnnl::cpu_isa isa) {
  const auto have = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto want = static_cast<unsigned>(isa);
  return (have & want) == want;
}

}  // namespace attn::detail
