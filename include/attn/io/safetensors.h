// attn/io/safetensors.h — reading and writing the safetensors format.
//
// Layout (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// then the data, each tensor row-major little-endian at [begin, end) of the
// data section. attn reads and writes F32, F64, I32 and I64, and stores f32
// tensors as BF16 or I8 where asked (StoredAs, below).
//
// The reader trusts nothing: the header length is bounded and must fit the
// file, the JSON must be well-formed with unique names, every dtype known,
// shape x dtype size must equal the byte range, ranges must lie inside the
// data section, not overlap and cover it without holes, at most 32
// dimensions. A file is read header first: its length is checked against the
// file's size, the header against the data section, and only then is memory
// allocated for the tensors, whose bytes are read straight into them. Every
// error is an IOError of one line naming the file (and the tensor, where there
// is one; hostile names are cut to 80 bytes and their control characters
// shown as '?').
//
// Content digest: a file written with `with_digest` carries in its metadata
// "sha256": the SHA-256 of its content in a form independent of the JSON's
// layout — every other metadata entry (key, value) in key order, then every
// tensor in name order (name, dtype tag, rank, dimensions, byte count,
// bytes), each string and byte run prefixed with its length as a
// little-endian uint64, after the tag "attn-safetensors-sha256-v1" and its
// NUL. A reader that finds the key checks it, so an edit anywhere (a
// metadata value, a weight) is refused. Checkpoints carry one.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "attn/core/tensor.h"
#include "attn/io/read_file.h"

namespace attn::io {

using TensorMap = std::map<std::string, Tensor>;
using Metadata = std::map<std::string, std::string>;

// The metadata key of the content digest.
inline constexpr const char* kDigestKey = "sha256";

// How an f32 tensor is stored where not as F32: BF16 (each value rounded to
// the nearest bfloat16, ties to even) or I8 (its values must be whole
// numbers in [-128, 127]; the caller keeps any scale beside it). Read back,
// both are f32 tensors again, widened exactly; the reader names them.
enum class StoredAs { bf16, i8 };
using StoredTypes = std::map<std::string, StoredAs>;

// The file's bytes: tensors in name order, the data 8-byte aligned. The
// tensors named in `narrow` (f32 ones) are stored as it says; ValueError for
// a name it does not hold, a tensor that is not f32, or an I8 value out of
// range.
std::string serialize_safetensors(const TensorMap& tensors, const Metadata& metadata = {},
                                  bool with_digest = false, const StoredTypes& narrow = {});

// The bytes serialize_safetensors makes, written atomically, streamed from
// the tensors (no copy of the whole file in memory).
void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const Metadata& metadata = {}, bool with_digest = false,
                      const StoredTypes& narrow = {});

// Reads and checks a file (see the top of this header); `metadata` receives
// its __metadata__, `stored` the tensors that were BF16 or I8 (now f32).
TensorMap load_safetensors(const std::string& path, Metadata* metadata = nullptr,
                           StoredTypes* stored = nullptr);
TensorMap load_safetensors(const InputFile& file, Metadata* metadata = nullptr,
                           StoredTypes* stored = nullptr);

// The same, from bytes already in memory (`what` names them in errors).
TensorMap parse_safetensors(std::string_view bytes, const std::string& what,
                            Metadata* metadata = nullptr, StoredTypes* stored = nullptr);

}  // namespace attn::io
