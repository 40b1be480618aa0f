// src/nn/config_check.h — internal: the checks every model config makes of
// its sizes and dropout (TransformerConfig, BahdanauConfig).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "attn/core/error.h"

namespace attn::nn::detail {

// Every size positive and dropout in [0, 1); a ValueError names the model and
// the key ("Transformer: num_heads must be positive, got 0").
inline void check_config(const char* model,
                         std::initializer_list<std::pair<const char*, std::int64_t>> sizes,
                         double dropout) {
  for (const auto& [name, v] : sizes)
    ATTN_CHECK(v > 0, ValueError, "{}: {} must be positive, got {}", model, name, v);
  ATTN_CHECK(dropout >= 0 && dropout < 1, ValueError, "{}: dropout must be in [0, 1), got {}",
             model, dropout);
}

}  // namespace attn::nn::detail
