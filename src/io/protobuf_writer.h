// io/protobuf_writer.h — protocol buffers messages written by hand, for a
// schema the caller knows (ONNX's ModelProto in seq2seq/onnx_export.cpp).
//
// attn cannot link libprotobuf: Debian's libsentencepiece carries its own
// copy of protobuf-lite whose exported google::protobuf symbols clash with
// libprotobuf's, and a program linking both crashes in protobuf's static
// initializers. Writing the wire format takes a page instead.
//
// The wire format (https://protobuf.dev/programming-guides/encoding/): a
// message is a sequence of fields, each a key, the varint
// (field_number << 3 | wire_type), followed by the value:
//   wire type 0 (VARINT)  int32, int64, uint64, bool, enum: a base-128 varint,
//                         7 bits a byte, least significant group first, the
//                         high bit set on every byte but the last. Negative
//                         int32 and int64 are their two's complement as a
//                         uint64: always 10 bytes.
//   wire type 2 (LEN)     string, bytes, embedded message: the length as a
//                         varint, then that many bytes.
//   wire type 5 (I32)     float (and fixed32): 4 bytes, little-endian.
// A repeated field is its key and value once per element. (Repeated numbers
// may also be "packed" into one LEN field; proto2 schemas such as onnx.proto
// pack only the fields marked [packed = true], and this writer needs none.)
// Fields are written in the order of the calls; protobuf's own serializers
// write them in field-number order, and a caller that does the same gets
// byte for byte the bytes protobuf would write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace attn::io {

class ProtoWriter {
 public:
  // uint64, bool and enum fields (wire type 0).
  void uint64_field(int number, std::uint64_t v);
  // int32 and int64 fields (wire type 0): a negative value takes 10 bytes.
  void int64_field(int number, std::int64_t v) {
    uint64_field(number, static_cast<std::uint64_t>(v));
  }
  // float fields (wire type 5).
  void float_field(int number, float v);
  // string and bytes fields (wire type 2).
  void bytes_field(int number, std::string_view v);
  // An embedded message (wire type 2): `fill()` writes its fields into this
  // writer, and its length is put in front of them afterwards.
  template <class Fill>
  void message_field(int number, Fill&& fill) {
    const std::size_t start = begin_message(number);
    fill();
    end_message(start);
  }

  // The message so far.
  const std::string& bytes() const { return out_; }
  std::string take() && { return std::move(out_); }

  // `v` as a varint, appended to `out`.
  static void append_varint(std::string& out, std::uint64_t v);

 private:
  enum WireType : std::uint32_t { kVarint = 0, kLen = 2, kI32 = 5 };
  void key(int number, WireType type);
  std::size_t begin_message(int number);
  void end_message(std::size_t start);

  std::string out_;
};

}  // namespace attn::io
