// attn/seq2seq/onnx_export.h — a trained Transformer as one ONNX model that a
// runtime decodes with a KV cache (docs/model-format.md, "ONNX").
//
// The graph runs one decoder step, and the encoder when it is asked to:
//   inputs   src_ids            int64 (batch, src_len)
//            src_valid_len      int64 (batch)
//            tgt_ids            int64 (batch, tgt_len)   the new tokens, at
//                                   positions past_len .. past_len + tgt_len - 1
//            past_self_key.{l}  float (batch, heads, past_len, head_dim)   per layer l
//            past_self_value.{l}
//            past_cross_key.{l} float (batch, heads, cross_len, head_dim)
//            past_cross_value.{l}
//   outputs  logits             float (batch, tgt_len, tgt_vocab_size)
//            present_self_key.{l}, present_self_value.{l}
//                               (batch, heads, past_len + tgt_len, head_dim)
//            present_cross_key.{l}, present_cross_value.{l}
//                               (batch, heads, src_len, head_dim)
// With cross_len 0 (the first step) the graph runs the encoder on src_ids and
// projects its outputs into each layer's cross-attention keys and values;
// afterwards the runtime feeds every present_* back as the next past_*, and
// the encoder is not run again. batch, src_len, tgt_len and past_len are
// dynamic. Masks are d2l's (scores past a valid length set to -1e6), and the
// t-th target token gets position t, as in attn's own decoding.
// Opset kOnnxOpset of the default domain (LayerNormalization needs 17), IR
// version kOnnxIrVersion. The model's metadata_props carry config.json
// ("attn.config") and both vocabularies ("attn.src_vocab", "attn.tgt_vocab",
// the files' text), so the file alone is enough to translate.
// The file is written by attn's own protobuf writer (src/io/protobuf_writer.h),
// not with libonnx and libprotobuf: Debian's libsentencepiece bundles a copy
// of protobuf whose exported symbols clash with libprotobuf's, and a program
// linking both crashes at start-up.
#pragma once

#include <cstdint>
#include <string>

#include "attn/data/vocab.h"
#include "attn/seq2seq/model_dir.h"

namespace attn::seq2seq {

inline constexpr std::int64_t kOnnxOpset = 17;
inline constexpr std::int64_t kOnnxIrVersion = 8;  // ONNX 1.12's, the release of opset 17

// The serialized ONNX model of `m`. ValueError for a model ONNX cannot hold as
// described above (a layer norm over more than the last dim, a model over
// protobuf's 2 GiB).
std::string onnx_model_bytes(const LoadedModel& m);

// onnx_model_bytes, written atomically to `path`.
void export_onnx(const LoadedModel& m, const std::string& path);

}  // namespace attn::seq2seq
