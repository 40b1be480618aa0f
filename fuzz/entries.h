// fuzz/entries.h — what each fuzz target does with one input.
//
// Shared by the libFuzzer targets (fuzz/*_fuzz.cpp, built with clang by
// fuzz/CMakeLists.txt) and by the regression test that runs in the normal
// build (tests/io/fuzz_regressions_test.cpp), which feeds every file of
// fuzz/seeds/<target>/ and fuzz/regressions/<target>/ to the same function.
//
// An input may be rejected only with attn::IOError, whose message must name
// the input and be one line. Anything else is a finding: another exception
// escaping, a broken invariant of an accepted input (reported by throwing
// Finding), a crash, a hang, or a sanitizer report.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

#include "attn/core/error.h"
#include "attn/core/rng.h"
#include "attn/data/nmt.h"
#include "attn/io/file_set.h"
#include "attn/io/line_reader.h"
#include "attn/io/safetensors.h"
#include "attn/nn/transformer.h"
#include "attn/seq2seq/model_dir.h"

namespace attn::fuzz {

// A broken invariant: the fuzz target aborts on it, the regression test fails.
class Finding : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

inline void expect(bool ok, std::string_view target, const std::string& what) {
  if (!ok) throw Finding(std::string(target) + ": " + what);
}

// A rejection must name the input (`name`) and fit on one line.
inline void expect_clear(const IOError& e, std::string_view target, std::string_view name) {
  std::string_view m = e.what();
  expect(m.find(name) != std::string_view::npos, target,
         "the error does not name the input: " + std::string(m));
  expect(m.find('\n') == std::string_view::npos && m.find('\r') == std::string_view::npos, target,
         "the error is not one line: " + std::string(m));
}

inline bool same_tensors(const io::TensorMap& a, const io::TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    if (ia->first != ib->first || ia->second.dtype() != ib->second.dtype() ||
        ia->second.shape() != ib->second.shape())
      return false;
    Tensor x = ia->second.contiguous(), y = ib->second.contiguous();
    std::size_t n = static_cast<std::size_t>(x.numel()) * dtype_size(x.dtype());
    if (n > 0 && std::memcmp(x.raw_data(), y.raw_data(), n) != 0) return false;
  }
  return true;
}

// ---- safetensors: the bytes of a model.safetensors file ----
//
// Accepted files are written back with serialize_safetensors and read again:
// the same names, dtypes, shapes, bytes and metadata.
inline void safetensors(std::string_view bytes) {
  constexpr std::string_view kTarget = "safetensors", kName = "fuzz.safetensors";
  io::TensorMap tensors;
  io::Metadata metadata;
  try {
    tensors = io::parse_safetensors(bytes, std::string(kName), &metadata);
  } catch (const IOError& e) {
    expect_clear(e, kTarget, kName);
    return;
  }
  std::string again = io::serialize_safetensors(tensors, metadata);
  io::Metadata metadata2;
  io::TensorMap tensors2;
  try {
    tensors2 = io::parse_safetensors(again, "written back", &metadata2);
  } catch (const IOError& e) {
    expect(false, kTarget, std::string("what was written cannot be read: ") + e.what());
  }
  expect(same_tensors(tensors, tensors2), kTarget, "the tensors differ after writing and reading");
  expect(metadata == metadata2, kTarget, "the metadata differs after writing and reading");
}

// ---- model_config: the text of a config.json ----
//
// Accepted configs must survive config_to_json -> config_from_json, satisfy
// the Transformer's own validation, and give a lower parameter bound that a
// model of that config really reaches. They are then checked against the
// weights of a small fixed model (check_weights): a config that passes must
// build a model that loads those weights, or fail with an attn::Error.
inline const io::TensorMap& small_model_weights() {
  static const io::TensorMap weights = [] {
    nn::TransformerConfig c;
    c.src_vocab_size = 7;
    c.tgt_vocab_size = 8;
    c.num_hiddens = 8;
    c.num_layers = 2;
    c.num_heads = 2;
    c.ffn_num_hiddens = 16;
    c.max_len = 16;
    nn::EncoderDecoder net(c);
    io::TensorMap m;
    for (auto& [name, p] : net.named_parameters()) m.emplace(name, p.detach());
    return m;
  }();
  return weights;
}

inline void model_config(std::string_view bytes) {
  constexpr std::string_view kTarget = "model_config", kName = "fuzz/config.json";
  // The same bytes as a model directory's manifest.json: rejected clearly,
  // or written back and read the same.
  try {
    io::Manifest m = io::parse_manifest(std::string(bytes), "'fuzz/manifest.json'");
    io::Manifest back = io::parse_manifest(io::manifest_to_json(m), "'written back'");
    expect(back.kind == m.kind && back.files.size() == m.files.size(), kTarget,
           "a manifest differs after writing and reading");
    for (std::size_t i = 0; i < m.files.size(); ++i)
      expect(back.files[i].name == m.files[i].name && back.files[i].bytes == m.files[i].bytes &&
                 back.files[i].sha256 == m.files[i].sha256,
             kTarget, "a manifest entry differs after writing and reading");
  } catch (const IOError& e) {
    expect_clear(e, kTarget, "'fuzz/manifest.json'");
  }
  seq2seq::ModelConfig c;
  try {
    c = seq2seq::config_from_json(std::string(bytes), std::string(kName));
  } catch (const IOError& e) {
    expect_clear(e, kTarget, kName);
    return;
  }
  const nn::TransformerConfig& t = c.transformer;
  try {
    t.validate();
  } catch (const ValueError& e) {
    expect(false, kTarget, std::string("accepted a config that validate() rejects: ") + e.what());
  }
  expect(c.num_steps >= 2 && c.num_steps <= t.max_len && c.num_steps <= 1024, kTarget,
         "num_steps outside [2, min(max_len, 1024)]");
  seq2seq::ModelConfig d;
  try {
    d = seq2seq::config_from_json(seq2seq::config_to_json(c), "written back");
  } catch (const IOError& e) {
    expect(false, kTarget, std::string("what was written cannot be read: ") + e.what());
  }
  const nn::TransformerConfig& u = d.transformer;
  expect(u.src_vocab_size == t.src_vocab_size && u.tgt_vocab_size == t.tgt_vocab_size &&
             u.num_hiddens == t.num_hiddens && u.num_layers == t.num_layers &&
             u.num_heads == t.num_heads && u.ffn_num_hiddens == t.ffn_num_hiddens &&
             u.dropout == t.dropout && u.max_len == t.max_len && u.use_bias == t.use_bias &&
             d.num_steps == c.num_steps,
         kTarget, "the config differs after writing and reading");
  const std::int64_t need = seq2seq::min_num_parameters(t);
  expect(need > 0, kTarget, "min_num_parameters is not positive");

  const io::TensorMap& weights = small_model_weights();
  try {
    seq2seq::check_weights(c, weights, "fuzz/model.safetensors");
  } catch (const IOError& e) {
    expect_clear(e, kTarget, "fuzz/model.safetensors");
    return;
  }
  std::int64_t held = 0;
  for (const auto& [_, w] : weights) held += w.numel();
  expect(need <= held, kTarget, "check_weights passed a config that needs more than the weights");
  // Passed: the model is small (bounded by the weights), so build it, unless
  // its positional-encoding table (not bounded by the weights) is large.
  if (t.max_len * t.num_hiddens > (1 << 16)) return;
  nn::EncoderDecoder net(t);
  std::int64_t built = net.num_parameters();
  expect(built >= need, kTarget, "a model has fewer parameters than min_num_parameters says");
  try {
    net.load_state_dict(weights);
  } catch (const Error&) {
    // A mismatch check_weights does not look at (e.g. use_bias): load_model
    // reports it as an IOError naming the tensor.
  }
}

// ---- corpus: a parallel corpus, plain or gzip, through the whole data path ----
//
// Byte 0 picks the options: bits 0-2 num_steps - 1, bits 3-4 num_examples
// (0, 1, 5, 50), bit 5 min_freq 1 or 2, bit 6 valid_fraction 0 or 0.3, bit 7
// gzip-compress the rest here first (then byte 1, when not 0, cuts that many
// bytes off the end of the compressed data). The rest are the file's bytes,
// which may be gzip data themselves. They go through decode_text,
// check_utf8, preprocess_nmt, tokenize_nmt, Vocab and build_array_nmt
// (make_data_nmt), then batching; the same text is also read as a
// vocabulary file.
inline std::string gzip_bytes(std::string_view in) {
  z_stream zs{};
  if (deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::bad_alloc();
  std::string out(deflateBound(&zs, static_cast<uLong>(in.size())) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int ret = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (ret != Z_STREAM_END) throw std::runtime_error("gzip_bytes: deflate failed");
  return out;
}

inline void corpus(std::string_view bytes) {
  constexpr std::string_view kTarget = "corpus", kName = "'fuzz.txt'";
  if (bytes.empty()) return;
  const auto o = static_cast<unsigned char>(bytes[0]);
  bytes.remove_prefix(1);
  data::NmtOptions options;
  options.num_steps = 1 + (o & 7);
  options.num_examples = std::array<long, 4>{0, 1, 5, 50}[(o >> 3) & 3];
  options.min_freq = 1 + ((o >> 5) & 1);
  options.valid_fraction = (o >> 6) & 1 ? 0.3 : 0.0;
  std::string file(bytes);
  std::size_t cut = 0;
  if (o & 0x80) {
    if (!bytes.empty()) {
      cut = static_cast<unsigned char>(bytes[0]);
      bytes.remove_prefix(1);
    }
    file = gzip_bytes(bytes);
    // erase, not resize: GCC 12 cannot tell that resize only shortens here
    // and warns of the growing path's memset (-Warray-bounds).
    file.erase(file.size() - std::min(cut, file.size()));
  }

  // The streaming reader of `attn train --data` (bounded lines, gzip on the
  // way), on the same bytes: a rejection must be clear; accepted text holds
  // no '\r' and no line longer than the limit.
  try {
    std::string lines =
        data::read_corpus_text(io::memory_source(file), std::string(kName), options.num_examples);
    expect(lines.find('\r') == std::string::npos, kTarget, "a CR left in the streamed text");
    std::size_t start = 0;
    for (std::size_t nl; (nl = lines.find('\n', start)) != std::string::npos; start = nl + 1)
      expect(nl - start <= data::kMaxLineBytes, kTarget, "a streamed line over the limit");
  } catch (const IOError& e) {
    expect_clear(e, kTarget, kName);
  }

  std::string text;
  try {
    text = data::decode_text(file, kName);
  } catch (const IOError& e) {
    expect_clear(e, kTarget, kName);
    return;
  }
  if ((o & 0x80) && cut == 0)
    expect(text == bytes, kTarget, "gzip data does not decompress to what was compressed");

  try {
    data::Vocab v = data::Vocab::parse(text, "'fuzz-vocab.txt'", data::kReservedTokens);
    expect(v.size() >= 4 && v.token(v.unk()) == "<unk>", kTarget,
           "a vocabulary file accepted without <unk>, or unk() not its index");
    expect(data::Vocab::parse(v.to_text(), "again").tokens() == v.tokens(), kTarget,
           "a vocabulary file read, written and read again differs");
  } catch (const IOError& e) {
    expect_clear(e, kTarget, "'fuzz-vocab.txt'");
  }

  data::NmtData d;
  try {
    d = data::make_data_nmt(text, kName, options);
  } catch (const IOError& e) {
    expect_clear(e, kTarget, kName);
    return;
  }
  for (const data::Vocab* v : {&d.src_vocab, &d.tgt_vocab}) {
    expect(v->size() >= 4 && v->token(0) == "<unk>" && v->token(1) == "<pad>" &&
               v->token(2) == "<bos>" && v->token(3) == "<eos>",
           kTarget, "a vocabulary does not start with <unk> <pad> <bos> <eos>");
    // What train writes into a model directory must read back the same.
    data::Vocab back;
    try {
      back = data::Vocab::parse(v->to_text(), "'written back'", data::kReservedTokens);
    } catch (const IOError& e) {
      expect(false, kTarget,
             std::string("a vocabulary built from a corpus cannot be read: ") + e.what());
    }
    expect(back.tokens() == v->tokens(), kTarget, "a vocabulary differs after writing and reading");
  }
  const std::int64_t n = d.src.array.size(0);
  expect(n >= 1 && d.tgt.array.size(0) == n, kTarget, "no training pairs, or unequal sides");
  for (const auto* pair : {&d.src, &d.tgt, &d.valid_src, &d.valid_tgt}) {
    const data::Vocab& v = (pair == &d.src || pair == &d.valid_src) ? d.src_vocab : d.tgt_vocab;
    const Tensor& a = pair->array;
    expect(a.dim() == 2 && a.size(1) == options.num_steps, kTarget, "array of the wrong shape");
    const std::int64_t* ids = a.data<std::int64_t>();
    const std::int64_t* lens = pair->valid_len.data<std::int64_t>();
    for (std::int64_t i = 0; i < a.numel(); ++i)
      expect(ids[i] >= 0 && ids[i] < static_cast<std::int64_t>(v.size()), kTarget,
             "a token id outside the vocabulary");
    // d2l's valid length: the ids in the row that are not <pad>. It is 0 when a
    // line is the word "<pad>" cut to num_steps, which d2l allows too.
    const std::int64_t pad = v["<pad>"];
    for (std::int64_t i = 0; i < a.size(0); ++i) {
      std::int64_t not_pad = 0;
      for (std::int64_t j = 0; j < options.num_steps; ++j)
        not_pad += ids[i * options.num_steps + j] != pad;
      expect(lens[i] == not_pad, kTarget, "a valid length that is not the count of non-<pad> ids");
    }
  }
  Generator gen(static_cast<std::uint64_t>(o));
  std::int64_t rows = 0;
  for (const auto& batch : data::shuffled_batches(n, 3, gen)) {
    Tensor x = data::take_rows(d.src.array, batch);
    rows += x.size(0);
  }
  expect(rows == n, kTarget, "the batches do not cover every pair once");
}

}  // namespace attn::fuzz
