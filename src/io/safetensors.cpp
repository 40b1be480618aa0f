#include "attn/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

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

const char* stored_tag(StoredAs as) { return as == StoredAs::bf16 ? "BF16" : "I8"; }
std::size_t stored_size(StoredAs as) { return as == StoredAs::bf16 ? 2 : 1; }

// A tag of the file: a dtype in memory, and how it is stored where it is
// narrower (BF16 and I8 are f32 tensors in memory).
bool parse_dtype(const std::string& tag, DType& dt, std::optional<StoredAs>& stored) {
  stored.reset();
  if (tag == "BF16" || tag == "I8") {
    dt = DType::f32;
    stored = tag == "I8" ? StoredAs::i8 : StoredAs::bf16;
  } else if (tag == "F32")
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
  std::optional<StoredAs> stored;  // BF16 or I8 in the file, f32 in memory
  const char* tag() const { return stored ? stored_tag(*stored) : dtype_tag(dtype); }
  std::size_t element_size() const { return stored ? stored_size(*stored) : dtype_size(dtype); }
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
  void tensor(const std::string& name, std::string_view tag, const Shape& shape, const void* data,
              std::size_t bytes) {
    field(name);
    field(tag);
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
    Entry e{name, DType::f32, {}, 0, 0, {}};
    const auto& dt = info["dtype"];
    ATTN_CHECK(dt.is_string() && parse_dtype(dt.get<std::string>(), e.dtype, e.stored), IOError,
               "'{}': tensor '{}' has unsupported dtype {} (attn reads F32, F64, I32, I64, BF16, "
               "I8)",
               what, tensor, describe_json(dt));
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
    ATTN_CHECK(e.end - e.begin == numel * e.element_size(), IOError,
               "'{}': tensor '{}' of shape {} and dtype {} needs {} bytes but data_offsets give {}",
               what, tensor, shape_str(e.shape), e.tag(), numel * e.element_size(),
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

// BF16 or I8 bytes as f32 values, exactly.
void widen(StoredAs as, const std::string& bytes, float* out) {
  if (as == StoredAs::i8) {
    for (std::size_t i = 0; i < bytes.size(); ++i)
      out[i] = static_cast<float>(static_cast<std::int8_t>(bytes[i]));
    return;
  }
  for (std::size_t i = 0; i < bytes.size() / 2; ++i) {
    std::uint16_t b = 0;
    std::memcpy(&b, bytes.data() + 2 * i, 2);
    out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
  }
}

// f32 values as BF16 (nearest, ties to even; a NaN stays a NaN) or I8
// (ValueError for a value that is not a whole number in [-128, 127]).
std::string narrow_bytes(StoredAs as, const Tensor& t, const std::string& name) {
  const float* x = t.data<float>();
  const auto n = static_cast<std::size_t>(t.numel());
  std::string out(n * stored_size(as), '\0');
  for (std::size_t i = 0; i < n; ++i) {
    if (as == StoredAs::i8) {
      ATTN_CHECK(x[i] >= -128.0f && x[i] <= 127.0f && x[i] == std::nearbyint(x[i]), ValueError,
                 "save_safetensors: tensor '{}' holds {} at {}, not a whole number in [-128, 127] "
                 "as I8 needs",
                 excerpt(name), x[i], i);
      out[i] = static_cast<char>(static_cast<std::int8_t>(x[i]));
      continue;
    }
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x[i]);
    std::uint16_t b;
    if ((u & 0x7fffffffu) > 0x7f800000u)
      b = static_cast<std::uint16_t>((u >> 16) | 0x40);  // a NaN, kept quiet
    else
      b = static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    std::memcpy(out.data() + 2 * i, &b, 2);
  }
  return out;
}

// The tensors of `entries`, their bytes read by `read(begin, dst, n)`;
// checks the content digest when the metadata holds one.
template <class Read>
TensorMap materialize(const std::vector<Entry>& entries, const Metadata& metadata,
                      const std::string& what, StoredTypes* stored, Read&& read) {
  TensorMap out;
  auto digest = metadata.find(kDigestKey);
  std::optional<ContentDigest> h;
  if (digest != metadata.end()) h.emplace(metadata);
  // Name order, as the digest takes the tensors.
  std::vector<const Entry*> order;
  for (const auto& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(),
            [](const Entry* a, const Entry* b) { return a->name < b->name; });
  std::string narrow;
  for (const Entry* e : order) {
    Tensor t = Tensor::empty(e->shape, e->dtype);
    const auto bytes = static_cast<std::size_t>(e->end - e->begin);
    if (!e->stored) {
      if (bytes > 0) read(e->begin, t.raw_data(), bytes);
      if (h) h->tensor(e->name, e->tag(), e->shape, t.raw_data(), bytes);
    } else {
      narrow.resize(bytes);
      if (bytes > 0) read(e->begin, narrow.data(), bytes);
      if (h) h->tensor(e->name, e->tag(), e->shape, narrow.data(), bytes);
      widen(*e->stored, narrow, t.data<float>());
      if (stored) (*stored)[e->name] = *e->stored;
    }
    out.emplace(e->name, t);
  }
  if (h) {
    ATTN_CHECK(h->hex() == digest->second, IOError,
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
// One tensor's bytes in the file: its own memory (as F32, F64, I32, I64),
// or narrowed into `narrow` (BF16, I8).
struct Chunk {
  Tensor tensor;
  std::string narrow;
  const char* tag;
  std::string_view bytes() const {
    if (!narrow.empty() || tensor.numel() == 0) return narrow;
    return {static_cast<const char*>(tensor.raw_data()),
            static_cast<std::size_t>(tensor.numel()) * dtype_size(tensor.dtype())};
  }
};

struct Layout {
  std::string head;
  std::vector<Chunk> data;
};

Layout layout(const TensorMap& tensors, const Metadata& metadata, bool with_digest,
              const StoredTypes& narrow) {
  ATTN_CHECK(!metadata.count(kDigestKey), ValueError,
             "save_safetensors: metadata key '{}' is reserved for the content digest", kDigestKey);
  for (const auto& [name, as] : narrow) {
    auto it = tensors.find(name);
    ATTN_CHECK(it != tensors.end(), ValueError,
               "save_safetensors: tensor '{}' to store as {} is not among the tensors",
               excerpt(name), stored_tag(as));
    ATTN_CHECK(it->second.dtype() == DType::f32, ValueError,
               "save_safetensors: tensor '{}' is {}, and only f32 tensors are stored as {}",
               excerpt(name), dtype_name(it->second.dtype()), stored_tag(as));
  }
  Metadata meta = metadata;
  std::vector<std::pair<const std::string*, Chunk>> order;
  for (const auto& [name, t] : tensors) {
    ATTN_CHECK(!name.empty() && name != "__metadata__", ValueError,
               "save_safetensors: invalid tensor name '{}'", excerpt(name));
    Chunk c{t.contiguous(), {}, dtype_tag(t.dtype())};
    if (auto as = narrow.find(name); as != narrow.end()) {
      c.narrow = narrow_bytes(as->second, c.tensor, name);
      c.tag = stored_tag(as->second);
      c.tensor = Tensor();
    }
    order.emplace_back(&name, std::move(c));
  }
  auto shape_of = [&](const std::string& name) { return tensors.at(name).shape(); };
  if (with_digest) {
    ContentDigest h(metadata);
    for (const auto& [name, c] : order) {
      const std::string_view b = c.bytes();
      h.tensor(*name, c.tag, shape_of(*name), b.data(), b.size());
    }
    meta[kDigestKey] = h.hex();
  }
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!meta.empty()) header["__metadata__"] = meta;
  std::uint64_t offset = 0;
  for (const auto& [name, c] : order) {
    std::uint64_t nbytes = c.bytes().size();
    header[*name] = {
        {"dtype", c.tag}, {"shape", shape_of(*name)}, {"data_offsets", {offset, offset + nbytes}}};
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

}  // namespace

std::string serialize_safetensors(const TensorMap& tensors, const Metadata& metadata,
                                  bool with_digest, const StoredTypes& narrow) {
  Layout l = layout(tensors, metadata, with_digest, narrow);
  std::size_t size = l.head.size();
  for (const Chunk& c : l.data) size += c.bytes().size();
  std::string out = std::move(l.head);
  out.reserve(size);
  for (const Chunk& c : l.data) out += c.bytes();
  return out;
}

void save_safetensors(const std::string& path, const TensorMap& tensors, const Metadata& metadata,
                      bool with_digest, const StoredTypes& narrow) {
  // Streamed from the tensors: no copy of the whole file in memory. Small
  // tensors are gathered into writes of up to 1 MiB (a model has hundreds).
  constexpr std::size_t kGather = std::size_t(1) << 20;
  Layout l = layout(tensors, metadata, with_digest, narrow);
  AtomicFile f(path);
  std::string gathered = std::move(l.head);
  for (const Chunk& c : l.data) {
    const std::string_view b = c.bytes();
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

TensorMap parse_safetensors(std::string_view bytes, const std::string& what, Metadata* metadata,
                            StoredTypes* stored) {
  const std::uint64_t n = read_header_length(
      bytes.substr(0, std::min<std::size_t>(8, bytes.size())), bytes.size(), what);
  std::string_view data = bytes.substr(8 + n);
  Metadata meta;
  std::vector<Entry> entries = parse_header(bytes.substr(8, n), data.size(), what, meta);
  TensorMap out = materialize(
      entries, meta, what, stored,
      [&](std::uint64_t at, void* dst, std::size_t k) { std::memcpy(dst, data.data() + at, k); });
  if (metadata) *metadata = std::move(meta);
  return out;
}

TensorMap load_safetensors(const InputFile& file, Metadata* metadata, StoredTypes* stored) {
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
  TensorMap out = materialize(
      entries, meta, what, stored,
      [&](std::uint64_t at, void* dst, std::size_t k) { file.read_at(8 + n + at, dst, k); });
  if (metadata) *metadata = std::move(meta);
  return out;
}

TensorMap load_safetensors(const std::string& path, Metadata* metadata, StoredTypes* stored) {
  return load_safetensors(InputFile(path), metadata, stored);
}

}  // namespace attn::io
