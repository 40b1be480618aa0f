#include "attn/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "attn/io/atomic_file.h"
#include "attn/io/digest.h"
#include "attn/io/json.h"
#include "attn/io/read_file.h"

static_assert(std::endian::native == std::endian::little,
              "attn's safetensors I/O assumes a little-endian host");

namespace attn::io {
namespace {

constexpr std::uint64_t kMaxHeader = 100'000'000;  // as the reference implementation
constexpr std::size_t kMaxRank = 32;

std::string excerpt(std::string_view s, std::size_t max = 80) { return printable_excerpt(s, max); }

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

namespace {

// One tensor of a header: where its bytes lie in the data section.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

// The digest of a file's content as attn defines it (see the header):
// every metadata entry but the digest itself, then every tensor in name
// order (name, dtype, shape, bytes), each field length-prefixed.
class ContentDigest {
 public:
  explicit ContentDigest(const Metadata& metadata) {
    h_.update(std::string_view("attn-safetensors-sha256-v1", 27));
    for (const auto& [k, v] : metadata)
      if (k != kDigestKey) {
        field(k);
        field(v);
      }
  }
  void tensor(const std::string& name, DType dtype, const Shape& shape, const void* data,
              std::size_t bytes) {
    field(name);
    field(dtype_tag(dtype));
    std::uint64_t rank = shape.size();
    h_.update(&rank, sizeof rank);
    for (std::int64_t d : shape) h_.update(&d, sizeof d);
    std::uint64_t n = bytes;
    h_.update(&n, sizeof n);
    h_.update(data, bytes);
  }
  std::string hex() { return h_.hex(); }

 private:
  void field(std::string_view s) {
    std::uint64_t n = s.size();
    h_.update(&n, sizeof n);
    h_.update(s);
  }
  Sha256 h_;
};

std::uint64_t read_header_length(std::string_view first8, std::uint64_t file_size,
                                 const std::string& what) {
  ATTN_CHECK(file_size >= 8, IOError,
             "'{}': not a safetensors file ({} bytes, too short for the header length)", what,
             file_size);
  std::uint64_t n = 0;
  std::memcpy(&n, first8.data(), 8);
  ATTN_CHECK(n <= kMaxHeader, IOError,
             "'{}': safetensors header length {} exceeds the limit of {} bytes", what, n,
             kMaxHeader);
  ATTN_CHECK(
      n <= file_size - 8, IOError,
      "'{}': safetensors header length {} runs past the end of the file ({} bytes): truncated?",
      what, n, file_size);
  return n;
}

// Every check of the header against a data section of `data_size` bytes.
std::vector<Entry> parse_header(std::string_view json_text, std::uint64_t data_size,
                                const std::string& what, Metadata& metadata) {
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

  std::vector<Entry> entries;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      ATTN_CHECK(info.is_object(), IOError, "'{}': __metadata__ must be an object of strings",
                 what);
      for (auto& [k, v] : info.items()) {
        ATTN_CHECK(v.is_string(), IOError, "'{}': __metadata__ value of '{}' is not a string", what,
                   excerpt(k));
        metadata[k] = v.get<std::string>();
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
               tensor, describe_json(dt));
    const auto& shape = info["shape"];
    ATTN_CHECK(shape.is_array(), IOError, "'{}': tensor '{}' has a shape that is not a list", what,
               tensor);
    ATTN_CHECK(shape.size() <= kMaxRank, IOError,
               "'{}': tensor '{}' has {} dimensions, more than the {} attn reads", what, tensor,
               shape.size(), kMaxRank);
    std::uint64_t numel = 1;
    for (const auto& d : shape) {
      ATTN_CHECK(d.is_number_unsigned() && d.get<std::uint64_t>() < (1ULL << 40), IOError,
                 "'{}': tensor '{}' has an invalid dimension {}", what, tensor, describe_json(d));
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
               what, tensor, describe_json(off));
    e.begin = off[0].get<std::uint64_t>();
    e.end = off[1].get<std::uint64_t>();
    ATTN_CHECK(e.begin <= e.end && e.end <= data_size, IOError,
               "'{}': tensor '{}' claims bytes [{}, {}) but the data section has {} bytes", what,
               tensor, e.begin, e.end, data_size);
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
  ATTN_CHECK(pos == data_size, IOError,
             "'{}': {} bytes after the last tensor are not described by the header", what,
             data_size - pos);
  return entries;
}

// The tensors of `entries`, their bytes read by `read(begin, dst, n)`;
// checks the content digest when the metadata holds one.
template <class Read>
TensorMap materialize(const std::vector<Entry>& entries, const Metadata& metadata,
                      const std::string& what, Read&& read) {
  TensorMap out;
  for (const auto& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) read(e.begin, t.raw_data(), static_cast<std::size_t>(e.end - e.begin));
    out.emplace(e.name, t);
  }
  auto digest = metadata.find(kDigestKey);
  if (digest != metadata.end()) {
    ContentDigest h(metadata);
    for (const auto& [name, t] : out)
      h.tensor(name, t.dtype(), t.shape(), t.raw_data(),
               static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
    ATTN_CHECK(h.hex() == digest->second, IOError,
               "'{}': the content does not match the sha256 in its metadata: the file was edited "
               "or damaged",
               what);
  }
  return out;
}

}  // namespace

namespace {

// A file's header (the length and the JSON) and its tensors, contiguous, in
// name order: what is written after the header, one after another.
struct Layout {
  std::string head;
  std::vector<Tensor> data;
};

Layout layout(const TensorMap& tensors, const Metadata& metadata, bool with_digest) {
  ATTN_CHECK(!metadata.count(kDigestKey), ValueError,
             "save_safetensors: metadata key '{}' is reserved for the content digest", kDigestKey);
  Metadata meta = metadata;
  std::vector<std::pair<const std::string*, Tensor>> order;
  for (const auto& [name, t] : tensors) {
    ATTN_CHECK(!name.empty() && name != "__metadata__", ValueError,
               "save_safetensors: invalid tensor name '{}'", excerpt(name));
    order.emplace_back(&name, t.contiguous());
  }
  if (with_digest) {
    ContentDigest h(metadata);
    for (const auto& [name, c] : order)
      h.tensor(*name, c.dtype(), c.shape(), c.raw_data(),
               static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype()));
    meta[kDigestKey] = h.hex();
  }
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!meta.empty()) header["__metadata__"] = meta;
  std::uint64_t offset = 0;
  for (const auto& [name, c] : order) {
    std::uint64_t nbytes = static_cast<std::uint64_t>(c.numel()) * dtype_size(c.dtype());
    header[*name] = {{"dtype", dtype_tag(c.dtype())},
                     {"shape", c.shape()},
                     {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string json = header.dump();
  while ((8 + json.size()) % 8 != 0) json += ' ';
  std::uint64_t n = json.size();
  Layout out;
  out.head.assign(8, '\0');
  std::memcpy(out.head.data(), &n, 8);
  out.head += json;
  for (auto& [name, c] : order) out.data.push_back(std::move(c));
  return out;
}

std::string_view bytes_of(const Tensor& c) {
  return {static_cast<const char*>(c.raw_data()),
          static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype())};
}

}  // namespace

std::string serialize_safetensors(const TensorMap& tensors, const Metadata& metadata,
                                  bool with_digest) {
  Layout l = layout(tensors, metadata, with_digest);
  std::size_t size = l.head.size();
  for (const Tensor& c : l.data) size += bytes_of(c).size();
  std::string out = std::move(l.head);
  out.reserve(size);
  for (const Tensor& c : l.data) out += bytes_of(c);
  return out;
}

void save_safetensors(const std::string& path, const TensorMap& tensors, const Metadata& metadata,
                      bool with_digest) {
  // Streamed from the tensors: no copy of the whole file in memory. Small
  // tensors are gathered into writes of up to 1 MiB (a model has hundreds).
  constexpr std::size_t kGather = std::size_t(1) << 20;
  Layout l = layout(tensors, metadata, with_digest);
  AtomicFile f(path);
  std::string gathered = std::move(l.head);
  for (const Tensor& c : l.data) {
    const std::string_view b = bytes_of(c);
    if (gathered.size() + b.size() > kGather && !gathered.empty()) {
      f.write(gathered);
      gathered.clear();
    }
    if (b.size() >= kGather) {
      f.write(b);
    } else {
      gathered += b;
    }
  }
  if (!gathered.empty()) f.write(gathered);
  f.commit();
}

TensorMap parse_safetensors(std::string_view bytes, const std::string& what, Metadata* metadata) {
  const std::uint64_t n = read_header_length(
      bytes.substr(0, std::min<std::size_t>(8, bytes.size())), bytes.size(), what);
  std::string_view data = bytes.substr(8 + n);
  Metadata meta;
  std::vector<Entry> entries = parse_header(bytes.substr(8, n), data.size(), what, meta);
  TensorMap out = materialize(entries, meta, what, [&](std::uint64_t at, void* dst, std::size_t k) {
    std::memcpy(dst, data.data() + at, k);
  });
  if (metadata) *metadata = std::move(meta);
  return out;
}

TensorMap load_safetensors(const InputFile& file, Metadata* metadata) {
  const std::string& what = file.path();
  char first8[8] = {};
  if (file.size() >= 8) file.read_at(0, first8, 8);
  const std::uint64_t n = read_header_length(std::string_view(first8, 8), file.size(), what);
  std::string json(static_cast<std::size_t>(n), '\0');
  file.read_at(8, json.data(), json.size());
  Metadata meta;
  std::vector<Entry> entries = parse_header(json, file.size() - 8 - n, what, meta);
  // Only now, with every size checked against the file, is memory allocated
  // for the tensors; their bytes are read straight into them.
  TensorMap out = materialize(entries, meta, what, [&](std::uint64_t at, void* dst, std::size_t k) {
    file.read_at(8 + n + at, dst, k);
  });
  if (metadata) *metadata = std::move(meta);
  return out;
}

TensorMap load_safetensors(const std::string& path, Metadata* metadata) {
  return load_safetensors(InputFile(path), metadata);
}

}  // namespace attn::io
