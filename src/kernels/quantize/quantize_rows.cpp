// One row's int8 quantization and dequantization (kernels/quantize/quantize_rows.h):
// the plain references and the choice of kernel (quantize_rows_avx512.cpp,
// quantize_rows_avx2.cpp).
#include "kernels/quantize/quantize_rows.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace attn::detail {

RowScale row_scale_reference(const float* x, std::int64_t K, float levels) {
  float amax = 0;
  for (std::int64_t k = 0; k < K; ++k) {
    const float a = std::fabs(x[k]);
    if (!(a <= FLT_MAX)) return row_scale_from_amax(a, false, levels);
    amax = std::max(amax, a);
  }
  return row_scale_from_amax(amax, true, levels);
}

std::int8_t quantize_reference(float x, float inv, int limit) {
  if (inv == 0.0f) return 0;  // a zero row, or one holding an infinity or a NaN
  const float l = static_cast<float>(limit);
  const float r = std::min(std::max(std::nearbyint(x * inv), -l), l);
  return static_cast<std::int8_t>(r);
}

float quantize_row(const float* x, std::int64_t K, std::uint8_t* out, bool vector) {
  if (vector) return quantize_row_avx512(x, K, out);
  const RowScale s = row_scale_reference(x, K);
  for (std::int64_t k = 0; k < K; ++k)
    out[k] = static_cast<std::uint8_t>(quantize_reference(x[k], s.inv) + 128);
  return s.scale;
}

float quantize_row_s8(const float* x, std::int64_t K, std::int8_t* out, bool vector) {
  if (vector) return quantize_row_s8_avx2(x, K, out);
  const RowScale s = row_scale_reference(x, K);
  for (std::int64_t k = 0; k < K; ++k) out[k] = quantize_reference(x[k], s.inv);
  return s.scale;
}

float quantize_row_s7(const float* x, std::int64_t K, std::int8_t* out, bool vector) {
  if (vector) return quantize_row_s7_avx2(x, K, out);
  const RowScale s = row_scale_reference(x, K, 63.0f);
  for (std::int64_t k = 0; k < K; ++k) out[k] = quantize_reference(x[k], s.inv, 63);
  return s.scale;
}

float quantize_row_u7(const float* x, std::int64_t K, std::uint8_t* out, bool vector) {
  if (vector) return quantize_row_u7_avx2(x, K, out);
  const RowScale s = row_scale_reference(x, K, 63.0f);
  for (std::int64_t k = 0; k < K; ++k)
    out[k] = static_cast<std::uint8_t>(quantize_reference(x[k], s.inv, 63) + 64);
  return s.scale;
}

// c and y may be the same memory (run_int8): each element is read before
// its float is written, through memcpy.
void dequantize_row(const std::int32_t* c, float sx, const float* sw, const float* b,
                    std::int64_t N, float* y) {
  for (std::int64_t n = 0; n < N; ++n) {
    std::int32_t cn;
    std::memcpy(&cn, c + n, sizeof cn);
    const float v = std::fma(static_cast<float>(cn), sx * sw[n], b ? b[n] : 0.0f);
    std::memcpy(y + n, &v, sizeof v);
  }
}

}  // namespace attn::detail
