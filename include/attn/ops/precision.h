// attn/ops/precision.h — bf16 mixed precision for the matrix products.
//
// f32 is the default and the reference. Inside a PrecisionScope of
// Precision::bf16, every f32 matrix product (matmul, bmm, linear, forward and
// backward) rounds both operands to bfloat16 (round to nearest even) and
// multiplies them with oneDNN's AVX-512 BF16 kernels, accumulating in f32 into
// an f32 result: the products of two bf16 numbers are exact in f32, so the
// only differences from f32 are the rounding of the inputs (a relative 2^-9
// each) and the order of the f32 sums. The fused attention's tiled kernels
// (attn/ops/attention.h) run their products in bf16 the same way. Everything
// else stays f32: the weights the optimizer updates (master weights), its
// state, the gradients, reductions, layer norm, softmax, the loss and the
// small and decode attention kernels.
// This is PyTorch's autocast for CPU matrix products, and what mixed-precision
// training means in Micikevicius et al. (2018), less the loss scaling that bf16's
// f32-sized exponent does not need.
//
// The setting belongs to the thread that opens the scope (products started on
// that thread, and the threads they use, follow it). Where the CPU lacks
// AVX-512 BF16 (bf16_supported() is false), a bf16 scope is refused
// (ValueError): callers check first and fall back to f32 with a message.
//
// Frozen weights (inference): converting a weight costs one pass over it per
// product, which dominates a decoding step of a few rows. A scope given the
// model's parameters, promising that they do not change while it is open,
// converts each of them once, on first use, and reuses the bf16 copy. In
// either precision, a Linear layer whose weight is frozen and whose product
// records no gradient (and is not tiny) multiplies by a copy of the weight
// packed once in the layout oneDNN's kernel reads (bf16 in a bf16 scope),
// with the bias and ReLU applied as the kernel stores its result
// (ops/packed_linear.cpp): the same products as the unpacked path, summed in
// another order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attn/core/enum_names.h"
#include "attn/core/tensor.h"

namespace attn {

enum class Precision { f32, bf16 };
template <>
struct EnumNames<Precision> {
  static constexpr const char* what = "precision";
  static constexpr std::array<const char*, 2> names{"f32", "bf16"};
};

// "f32", "bf16"; and back (ValueError naming the text and the choices):
// enum_name and parse_enum.
const char* precision_name(Precision p);
Precision parse_precision(const std::string& text);

// True when this CPU runs bf16 products on hardware (AVX-512 BF16). Can be
// forced off with the environment variable ATTN_NO_BF16=1 (tests of the
// fallback).
bool bf16_supported();

// How many multiply-adds per second this CPU's bf16 dot products (AVX-512
// BF16's VDPBF16PS, which attn's own bf16 kernels run) make against its f32
// FMAs (VFMADD on 512-bit registers). 2: the bf16 instruction, two products
// a lane, issues as often as the FMA; 1: bf16 gains nothing; below 1, bf16
// is slower than f32. Measured 0.49 on an Intel Xeon whose AMX units its
// hypervisor hides (there bf16 training ran at 0.56-0.73x f32's speed).
// Measured once, on the calling thread, in well under a millisecond (the
// fastest of several short runs of each, interleaved); 0 where
// bf16_supported() is false. For messages only: it changes no result.
double bf16_dot_rate();

// True where oneDNN runs bf16 products on AMX tiles (its effective ISA, so
// ONEDNN_MAX_CPU_ISA counts): those do not use VDPBF16PS.
bool bf16_products_on_amx();

// True where bf16 products run slower than f32 ones on this CPU: it has
// AVX-512 BF16, oneDNN is not on AMX tiles, and bf16_dot_rate() is below 1
// (slower before the conversions to bf16 are even counted). The CLI warns
// then; nothing chooses by it.
bool bf16_slower_than_f32();

// The precision of this thread's matrix products.
Precision matmul_precision();

// Sets this thread's precision until the scope ends (scopes nest). With
// `frozen` parameters: their bf16 copies and packed layouts are made once and
// kept until the scope ends; they must not change meanwhile. The outermost
// scope given frozen parameters owns them; inner scopes' lists are ignored.
//
// Other threads join a thread's scope: Shared (from current() on that
// thread) is its precision and its kept copies, and PrecisionScope(shared)
// on another thread uses them until that scope ends. Every thread then
// multiplies by the same copies, made once by whichever thread needs one
// first (lookups and first uses take a lock); the copies live while any
// scope uses them. seq2seq::translate_texts does this for the threads that
// decode batches side by side.
class PrecisionScope {
 public:
  struct Frozen;  // the kept copies (ops/precision.cpp)
  struct Shared {
    Precision precision = Precision::f32;
    std::shared_ptr<Frozen> frozen;  // null: no frozen parameters
  };

  explicit PrecisionScope(Precision p, const std::vector<Tensor>& frozen = {});
  explicit PrecisionScope(const Shared& shared);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

  // This thread's precision and kept copies.
  static Shared current();

 private:
  Precision previous_;
  Frozen* previous_frozen_;
  std::shared_ptr<Frozen> frozen_;  // what this scope set (owned or joined), else null
};

// Packed weights and small products. Inside a scope given frozen parameters,
// a product of fewer than 16 rows uses a weight's packed copy only where a
// larger product made one before on this thread (a single sentence, one row
// a step, decodes faster unpacked); the packed and unpacked products sum in
// different orders, so such a product's last bits depend on what the thread
// ran before. While a PackAllRows lives on a thread, every product there
// with a frozen weight packs it on first use, whatever its rows: a product's
// bits then depend on its operands alone. seq2seq::translate_texts opens one
// on every thread that decodes when there are several batches, so that which
// thread decodes which batch changes nothing. Guards nest.
class PackAllRows {
 public:
  PackAllRows();
  ~PackAllRows();
  PackAllRows(const PackAllRows&) = delete;
  PackAllRows& operator=(const PackAllRows&) = delete;
};

// Rows computed as they would be alone (continuous batching: a sentence's
// translation must not depend on the sentences that share its decoding
// steps). While a BatchInvariant lives on a thread (guards nest), inside a
// scope given frozen parameters:
//   - every product with a frozen weight runs on attn's own kernel
//     (f32_gemm, bf16_gemm, or the int8 kernel of a QuantizeScope), whose
//     sums take each row alone, whatever the weight's size and the rows
//     (as PackAllRows, and also the small products that otherwise keep the
//     unpacked path, whose kernels choose by the number of rows); where the
//     CPU has no f32 kernel (no AVX2, ATTN_ISA=portable), the kernel's plain
//     reference, with the same bits; in bf16 without the bf16 kernel, the
//     oneDNN primitive as before (no such promise there);
//   - the decode attention kernel never splits one row's keys between
//     threads (flash-decoding's split depends on the number of rows).
// Everything else a decoding step runs is per row already (layer norm,
// softmax, the decode kernel, element-wise ops). Only for frozen weights
// (a PrecisionScope given the parameters, as every decoding command opens).
class BatchInvariant {
 public:
  BatchInvariant();
  ~BatchInvariant();
  BatchInvariant(const BatchInvariant&) = delete;
  BatchInvariant& operator=(const BatchInvariant&) = delete;

 private:
  PackAllRows pack_;
};
// True while a BatchInvariant lives on this thread.
bool batch_invariant();

// ---- bfloat16 numbers ----

// f32 -> bf16 bits, round to nearest even; a NaN stays a (quiet) NaN of the
// same sign; subnormal inputs become a zero of their sign (as the AVX-512 BF16
// conversion instructions do). The plain reference of the vector kernel.
std::uint16_t to_bf16_reference(float x);
inline float from_bf16(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

// n floats to bf16 bits: the AVX-512 BF16 instructions where the CPU has
// them, else the reference; the same bits either way.
void to_bf16(const float* x, std::uint16_t* out, std::int64_t n);

// A copy of an f32 tensor with every element rounded to bf16 and widened back
// (the values a bf16 product reads): the operands of the references.
Tensor round_to_bf16(const Tensor& x);

}  // namespace attn
