#include "attn/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "attn/io/atomic_file.h"
#include "attn/io/read_file.h"

static_assert(std::endian::native == std::endian::little,
              "attn's safetensors I/O assumes a little-endian host");

namespace attn::io {
namespace {

constexpr std::uint64_t kMaxHeader = 100'000'000;  // as the reference implementation
constexpr std::size_t kMaxRank = 32;

// A name or JSON value for an error message: at most `max` bytes, control
// characters as '?', so that a hostile header cannot flood or break the line.
std::string excerpt(std::string_view s, std::size_t max = 80) {
  std::size_t n = std::min(s.size(), max);
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    out += c < 0x20 || c == 0x7F ? '?' : static_cast<char>(c);
  }
  if (n < s.size()) out += "...";
  return out;
}

// A JSON value for an error message, without recursing into deep nesting.
std::string describe(const nlohmann::json& v) {
  if (v.is_array()) return fmt::format("a list of {} items", v.size());
  if (v.is_object()) return fmt::format("an object of {} keys", v.size());
  return excerpt(v.dump());
}

const char* dtype_tag(DType dt) {
  switch (dt) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
  }
  return "?";
}

bool parse_dtype(const std::string& tag, DType& dt) {
  if (tag == "F32")
    dt = DType::f32;
  else if (tag == "F64")
    dt = DType::f64;
  else if (tag == "I32")
    dt = DType::i32;
  else if (tag == "I64")
    dt = DType::i64;
  else
    return false;
  return true;
}

}  // namespace

std::string serialize_safetensors(const TensorMap& tensors, const Metadata& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  std::vector<Tensor> order;
  for (const auto& [name, t] : tensors) {
    ATTN_CHECK(!name.empty() && name != "__metadata__", ValueError,
               "save_safetensors: invalid tensor name '{}'", excerpt(name));
    Tensor c = t.contiguous();
    std::uint64_t nbytes = static_cast<std::uint64_t>(c.numel()) * dtype_size(c.dtype());
    header[name] = {{"dtype", dtype_tag(c.dtype())},
                    {"shape", c.shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    order.push_back(c);
  }
  std::string json = header.dump();
  while ((8 + json.size()) % 8 != 0) json += ' ';
  std::uint64_t n = json.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  out.reserve(8 + json.size() + offset);
  out += json;
  for (const auto& t : order)
    out.append(static_cast<const char*>(t.raw_data()), t.numel() * dtype_size(t.dtype()));
  return out;
}

void save_safetensors(const std::string& path, const TensorMap& tensors, const Metadata& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

TensorMap parse_safetensors(std::string_view bytes, const std::string& what, Metadata* metadata) {
  ATTN_CHECK(bytes.size() >= 8, IOError,
             "'{}': not a safetensors file ({} bytes, too short for the header length)", what,
             bytes.size());
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  ATTN_CHECK(n <= kMaxHeader, IOError,
             "'{}': safetensors header length {} exceeds the limit of {} bytes", what, n,
             kMaxHeader);
  ATTN_CHECK(
      n <= bytes.size() - 8, IOError,
      "'{}': safetensors header length {} runs past the end of the file ({} bytes): truncated?",
      what, n, bytes.size());
  std::string_view json_text = bytes.substr(8, n);
  std::string_view data = bytes.substr(8 + n);

  // Parse, rejecting duplicate names at the top level.
  std::vector<std::string> names;
  std::string duplicate;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(
        json_text.begin(), json_text.end(),
        [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          if (depth == 1 && event == nlohmann::json::parse_event_t::key) {
            const std::string& k = parsed.get_ref<const std::string&>();
            if (std::find(names.begin(), names.end(), k) != names.end() && duplicate.empty())
              duplicate = k;
            names.push_back(k);
          }
          return true;
        });
  } catch (const nlohmann::json::exception& e) {
    throw IOError(fmt::format("'{}': the safetensors header is not valid JSON: {}", what,
                              excerpt(e.what(), 300)));
  }
  ATTN_CHECK(duplicate.empty(), IOError,
             "'{}': tensor '{}' appears twice in the safetensors header", what, excerpt(duplicate));
  ATTN_CHECK(header.is_object(), IOError, "'{}': the safetensors header is not a JSON object",
             what);

  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    std::uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      ATTN_CHECK(info.is_object(), IOError, "'{}': __metadata__ must be an object of strings",
                 what);
      for (auto& [k, v] : info.items()) {
        ATTN_CHECK(v.is_string(), IOError, "'{}': __metadata__ value of '{}' is not a string", what,
                   excerpt(k));
        if (metadata) (*metadata)[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string tensor = excerpt(name);
    ATTN_CHECK(!name.empty(), IOError, "'{}': a tensor with an empty name", what);
    ATTN_CHECK(info.is_object() && info.contains("dtype") && info.contains("shape") &&
                   info.contains("data_offsets"),
               IOError, "'{}': tensor '{}' needs dtype, shape and data_offsets", what, tensor);
    Entry e{name, DType::f32, {}, 0, 0};
    const auto& dt = info["dtype"];
    ATTN_CHECK(dt.is_string() && parse_dtype(dt.get<std::string>(), e.dtype), IOError,
               "'{}': tensor '{}' has unsupported dtype {} (attn reads F32, F64, I32, I64)", what,
               tensor, describe(dt));
    const auto& shape = info["shape"];
    ATTN_CHECK(shape.is_array(), IOError, "'{}': tensor '{}' has a shape that is not a list", what,
               tensor);
    ATTN_CHECK(shape.size() <= kMaxRank, IOError,
               "'{}': tensor '{}' has {} dimensions, more than the {} attn reads", what, tensor,
               shape.size(), kMaxRank);
    std::uint64_t numel = 1;
    for (const auto& d : shape) {
      ATTN_CHECK(d.is_number_unsigned() && d.get<std::uint64_t>() < (1ULL << 40), IOError,
                 "'{}': tensor '{}' has an invalid dimension {}", what, tensor, describe(d));
      std::uint64_t v = d.get<std::uint64_t>();
      ATTN_CHECK(v == 0 || numel <= (1ULL << 50) / v, IOError,
                 "'{}': tensor '{}' is impossibly large", what, tensor);
      numel *= v;
      e.shape.push_back(static_cast<std::int64_t>(v));
    }
    const auto& off = info["data_offsets"];
    ATTN_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                   off[1].is_number_unsigned(),
               IOError, "'{}': tensor '{}' has invalid data_offsets ({}; expected [begin, end])",
               what, tensor, describe(off));
    e.begin = off[0].get<std::uint64_t>();
    e.end = off[1].get<std::uint64_t>();
    ATTN_CHECK(e.begin <= e.end && e.end <= data.size(), IOError,
               "'{}': tensor '{}' claims bytes [{}, {}) but the data section has {} bytes", what,
               tensor, e.begin, e.end, data.size());
    ATTN_CHECK(e.end - e.begin == numel * dtype_size(e.dtype), IOError,
               "'{}': tensor '{}' of shape {} and dtype {} needs {} bytes but data_offsets give {}",
               what, tensor, shape_str(e.shape), dtype_tag(e.dtype), numel * dtype_size(e.dtype),
               e.end - e.begin);
    entries.push_back(std::move(e));
  }
  // Ranges must tile the data section exactly: no overlap, no hole.
  std::vector<const Entry*> sorted;
  for (const auto& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t pos = 0;
  for (const Entry* e : sorted) {
    ATTN_CHECK(e->begin >= pos, IOError, "'{}': tensor '{}' overlaps another tensor's bytes", what,
               excerpt(e->name));
    ATTN_CHECK(e->begin == pos, IOError, "'{}': a hole of {} bytes before tensor '{}'", what,
               e->begin - pos, excerpt(e->name));
    pos = e->end;
  }
  ATTN_CHECK(pos == data.size(), IOError,
             "'{}': {} bytes after the last tensor are not described by the header", what,
             data.size() - pos);

  TensorMap out;
  for (const auto& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.raw_data(), data.data() + e.begin, e.end - e.begin);
    out.emplace(e.name, t);
  }
  return out;
}

TensorMap load_safetensors(const std::string& path, Metadata* metadata) {
  return parse_safetensors(read_file_bytes(path), path, metadata);
}

}  // namespace attn::io
