// src/ops/quantize_rows.h — internal: one row's int8 quantization and
// dequantization (ops/quantize.cpp's formulas): the plain references and
// the AVX-512 kernels, which give the same bits.
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

// y[n] = fma(float(c[n] - comp[n]), sx * sw[n], b[n]) (comp, b may be null);
// c and y may be the same memory. vector: AVX-512, else plain loops.
void dequantize_row(const std::int32_t* c, const std::int32_t* comp, float sx, const float* sw,
                    const float* b, std::int64_t N, float* y, bool vector);

}  // namespace attn::detail
