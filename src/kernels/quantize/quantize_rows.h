// src/kernels/quantize/quantize_rows.h — internal: one row's int8 quantization and
// dequantization (ops/quantize.cpp's formulas): the plain references and
// the AVX-512 and AVX2 quantization kernels, which give the same bits.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

namespace attn::detail {

// Rows whose largest magnitude is below this count as zero (127 / amax must
// stay finite).
inline constexpr float kTinyAmax = 1e-30f;

struct RowScale {
  float scale;  // sx: max|x| / 127; 1 for a zero row; NaN for a row with inf or NaN
  float inv;  // 127 / max|x|; 0 for a zero or non-finite row
  bool finite;
};

// The scale of a row from its largest magnitude, `finite` false where the
// row holds an infinity or a NaN: the one rule of the reference and the
// kernels. Internal linkage: the kernels call it inside their target regions
// (kernels/target.h).
namespace {
inline RowScale row_scale_from_amax(float amax, bool finite, float levels = 127.0f) {
  if (!finite || !(amax <= FLT_MAX)) return {std::nanf(""), 0.0f, false};
  if (amax < kTinyAmax) return {1.0f, 0.0f, true};
  return {amax / levels, levels / amax, true};
}
}  // namespace

// The scale of a row of K values at `levels` each side of zero (127, or
// 63 for the AVX2 kernel's 7 bits).
RowScale row_scale_reference(const float* x, std::int64_t K, float levels = 127.0f);

// round(x * inv) to nearest even, clamped to [-limit, limit]; 0 where inv is 0.
std::int8_t quantize_reference(float x, float inv, int limit = 127);

// x (K) into u8 (xq + 128) in out; returns the row's scale. vector: the
// AVX-512 kernel (the caller checks the CPU), else the reference.
float quantize_row(const float* x, std::int64_t K, std::uint8_t* out, bool vector);

// x (K) into s8 (xq itself) in out, for 8-bit weights (ops/quantize.cpp)
// and the int8 screen of greedy decoding (ops/linear_argmax.cpp); returns the row's
// scale. vector: the AVX2 kernel (kernels/quantize/quantize_rows_avx2.cpp;
// the caller checks the CPU: AVX2), else the reference. The same values as
// quantize_row, 128 lower.
float quantize_row_s8(const float* x, std::int64_t K, std::int8_t* out, bool vector);

// The AVX-512 kernel of quantize_row (quantize_rows_avx512.cpp), its AVX2
// form (for the AVX-VNNI product) and the AVX2 kernel of quantize_row_s8
// (quantize_rows_avx2.cpp): the same bits as the reference.
float quantize_row_avx512(const float* x, std::int64_t K, std::uint8_t* out);
float quantize_row_u8_avx2(const float* x, std::int64_t K, std::uint8_t* out);
float quantize_row_s8_avx2(const float* x, std::int64_t K, std::int8_t* out);

// The AVX2 kernel's 7-bit operands (kernels/gemm/int8_gemm.h): x (K) into
// xq = round(x * 63 / max|x|) in [-63, 63], scale max|x| / 63, stored as s8
// (quantize_row_s7: the weights) or as u8 xq + 64 in [1, 127]
// (quantize_row_u7: the activations); returns the row's scale. vector: the
// AVX2 kernel (the caller checks the CPU), else the reference.
float quantize_row_s7(const float* x, std::int64_t K, std::int8_t* out, bool vector);
float quantize_row_u7(const float* x, std::int64_t K, std::uint8_t* out, bool vector);
float quantize_row_s7_avx2(const float* x, std::int64_t K, std::int8_t* out);
float quantize_row_u7_avx2(const float* x, std::int64_t K, std::uint8_t* out);

// y[n] = fma(float(c[n]), sx * sw[n], b[n]) (b may be null), the int32 sums
// of the portable path (ops/quantize.cpp) into floats; c and y may be the
// same memory. (int8_gemm does the same in its registers.)
void dequantize_row(const std::int32_t* c, float sx, const float* sw, const float* b,
                    std::int64_t N, float* y);

}  // namespace attn::detail
