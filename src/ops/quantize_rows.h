// src/ops/quantize_rows.h — internal: one row's int8 quantization and
// dequantization (ops/quantize.cpp's formulas): the plain references and
// the AVX-512 quantization kernel, which gives the same bits.
#pragma once

#include <cstdint>

namespace attn::detail {

struct RowScale {
  float scale;  // sx: max|x| / 127; 1 for a zero row; NaN for a row with inf or NaN
  float inv;  // 127 / max|x|; 0 for a zero or non-finite row
  bool finite;
};

// The scale of a row of K values.
RowScale row_scale_reference(const float* x, std::int64_t K);

// round(x * inv) to nearest even, clamped to [-127, 127]; 0 where inv is 0.
std::int8_t quantize_reference(float x, float inv);

// x (K) into u8 (xq + 128) in out; returns the row's scale. vector: the
// AVX-512 kernel (the caller checks the CPU), else the reference.
float quantize_row(const float* x, std::int64_t K, std::uint8_t* out, bool vector);

// y[n] = fma(float(c[n]), sx * sw[n], b[n]) (b may be null), the int32 sums
// of the portable path (ops/quantize.cpp) into floats; c and y may be the
// same memory. (int8_gemm does the same in its registers.)
void dequantize_row(const std::int32_t* c, float sx, const float* sw, const float* b,
                    std::int64_t N, float* y);

}  // namespace attn::detail
