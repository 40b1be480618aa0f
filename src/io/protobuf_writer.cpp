#include "io/protobuf_writer.h"

#include <bit>
#include <cstring>

#include "attn/core/error.h"

static_assert(std::endian::native == std::endian::little,
              "ProtoWriter writes floats as they lie in memory: it assumes a little-endian host");

namespace attn::io {

void ProtoWriter::append_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void ProtoWriter::key(int number, WireType type) {
  // Field numbers run from 1 to 2^29 - 1.
  ATTN_CHECK(number >= 1 && number < (1 << 29), InternalError,
             "ProtoWriter: field number {} is not in [1, 2^29)", number);
  append_varint(out_, (static_cast<std::uint64_t>(number) << 3) | type);
}

void ProtoWriter::uint64_field(int number, std::uint64_t v) {
  key(number, kVarint);
  append_varint(out_, v);
}

void ProtoWriter::float_field(int number, float v) {
  key(number, kI32);
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out_.append(b, sizeof b);
}

void ProtoWriter::bytes_field(int number, std::string_view v) {
  key(number, kLen);
  append_varint(out_, v.size());
  out_.append(v);
}

std::size_t ProtoWriter::begin_message(int number) {
  key(number, kLen);
  return out_.size();
}

// The message's fields lie at [start, end): its length goes in front of them.
// The insert moves them once; a message nested n deep is moved n times.
void ProtoWriter::end_message(std::size_t start) {
  std::string len;
  append_varint(len, out_.size() - start);
  out_.insert(start, len);
}

}  // namespace attn::io
