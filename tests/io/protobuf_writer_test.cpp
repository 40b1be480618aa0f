// The protobuf wire format written by hand (io/protobuf_writer.h), against
// bytes worked out by hand and the examples of protobuf's encoding guide
// (https://protobuf.dev/programming-guides/encoding/).
#include "io/protobuf_writer.h"

#include <limits>
#include <vector>

#include "testing.h"

using namespace attn;
using namespace attn::io;

namespace {

// "0a 00 10 11" -> the bytes.
std::string hex(const std::string& s) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    if (s[i] == ' ') {
      ++i;
      continue;
    }
    out.push_back(static_cast<char>(std::stoi(s.substr(i, 2), nullptr, 16)));
    i += 2;
  }
  return out;
}

std::string varint(std::uint64_t v) {
  std::string out;
  ProtoWriter::append_varint(out, v);
  return out;
}

}  // namespace

TEST(ProtoWriter, VarintsTakeSevenBitsAByteLowGroupFirst) {
  EXPECT_EQ(varint(0), hex("00"));
  EXPECT_EQ(varint(1), hex("01"));
  EXPECT_EQ(varint(127), hex("7f"));
  EXPECT_EQ(varint(128), hex("80 01"));
  EXPECT_EQ(varint(150), hex("96 01"));
  EXPECT_EQ(varint(300), hex("ac 02"));
  EXPECT_EQ(varint(16383), hex("ff 7f"));
  EXPECT_EQ(varint(16384), hex("80 80 01"));
  EXPECT_EQ(varint(std::uint64_t{1} << 63), hex("80 80 80 80 80 80 80 80 80 01"));
  EXPECT_EQ(varint(std::numeric_limits<std::uint64_t>::max()),
            hex("ff ff ff ff ff ff ff ff ff 01"));
}

TEST(ProtoWriter, NegativeInt64IsATenByteVarint) {
  ProtoWriter w;
  w.int64_field(3, -1);  // AttributeProto.i = -1 (an axis)
  EXPECT_EQ(w.bytes(), hex("18 ff ff ff ff ff ff ff ff ff 01"));
  ProtoWriter m;
  m.int64_field(1, -2);
  m.int64_field(1, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(m.bytes(), hex("08 fe ff ff ff ff ff ff ff ff 01"
                           "08 80 80 80 80 80 80 80 80 80 01"));
}

TEST(ProtoWriter, KeysCarryFieldNumberAndWireType) {
  ProtoWriter w;
  w.uint64_field(1, 150);  // the guide's Test1 {a: 150}
  w.uint64_field(15, 0);  // the last one-byte key
  w.uint64_field(16, 0);  // the first two-byte key
  w.uint64_field(20, 1);  // AttributeProto.type = FLOAT
  w.uint64_field((1 << 29) - 1, 0);  // the largest field number
  EXPECT_EQ(w.bytes(), hex("08 96 01  78 00  80 01 00  a0 01 01  f8 ff ff ff 0f 00"));
  EXPECT_THROW(w.uint64_field(0, 1), InternalError);
  EXPECT_THROW(w.uint64_field(1 << 29, 1), InternalError);
}

TEST(ProtoWriter, FloatsAreFourLittleEndianBytes) {
  ProtoWriter w;
  w.float_field(2, 0.5f);  // 0x3f000000
  w.float_field(2, 1e-5f);  // 0x3727c5ac
  w.float_field(2, -1e6f);  // 0xc9742400
  w.float_field(2, -0.0f);  // written although zero: proto2 fields that are set are written
  EXPECT_EQ(w.bytes(), hex("15 00 00 00 3f  15 ac c5 27 37  15 00 24 74 c9  15 00 00 00 80"));
}

TEST(ProtoWriter, StringsAndBytesArePrefixedWithTheirLength) {
  ProtoWriter w;
  w.bytes_field(2, "testing");  // the guide's Test2 {b: "testing"}
  w.bytes_field(1, "");  // OperatorSetIdProto.domain = "" (the default domain)
  w.bytes_field(9, std::string("\0\x01\xff", 3));
  EXPECT_EQ(w.bytes(), hex("12 07 74 65 73 74 69 6e 67  0a 00  4a 03 00 01 ff"));

  ProtoWriter big;
  big.bytes_field(9, std::string(300, 'x'));
  ASSERT_EQ(big.bytes().size(), 1u + 2u + 300u);
  EXPECT_EQ(big.bytes().substr(0, 3), hex("4a ac 02"));
}

TEST(ProtoWriter, EmbeddedMessagesGetTheirLengthInFront) {
  ProtoWriter w;  // the guide's Test3 {c: Test1 {a: 150}}
  w.message_field(3, [&] { w.uint64_field(1, 150); });
  EXPECT_EQ(w.bytes(), hex("1a 03 08 96 01"));

  // A ModelProto with ir_version 8 and opset_import {domain: "", version: 17},
  // and an empty message (written: proto2 keeps the presence of a set field).
  ProtoWriter model;
  model.int64_field(1, 8);
  model.message_field(8, [&] {
    model.bytes_field(1, "");
    model.int64_field(2, 17);
  });
  model.message_field(7, [] {});
  EXPECT_EQ(model.bytes(), hex("08 08  42 04 0a 00 10 11  3a 00"));
}

TEST(ProtoWriter, NestedMessagesLongerThan127Bytes) {
  // ValueInfoProto {name: "x", type {tensor_type {elem_type: FLOAT,
  // shape {dim {dim_param: 130 x "b"}}}}}: lengths of two bytes, four deep.
  const std::string param(130, 'b');
  ProtoWriter w;
  w.bytes_field(1, "x");
  w.message_field(2, [&] {  // type
    w.message_field(1, [&] {  // tensor_type
      w.int64_field(1, 1);  // elem_type
      w.message_field(2, [&] {  // shape
        w.message_field(1, [&] {  // dim
          w.bytes_field(2, param);
        });
      });
    });
  });
  std::string want = hex("0a 01 78");
  want += hex("12 90 01");  // type: 3 + 141 = 144 bytes
  want += hex("0a 8d 01");  // tensor_type: 2 + 139 = 141 bytes
  want += hex("08 01");  // elem_type
  want += hex("12 88 01");  // shape: 3 + 133 = 136 bytes
  want += hex("0a 85 01");  // dim: 3 + 130 = 133 bytes
  want += hex("12 82 01") + param;  // dim_param: 130 bytes
  EXPECT_EQ(w.bytes(), want);
  EXPECT_EQ(std::move(w).take(), want);
}
