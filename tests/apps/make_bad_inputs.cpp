// make_bad_inputs OUT — writes the bad files of the CLI's bad-input table
// (tests/apps/CMakeLists.txt) into OUT:
//
//   OUT/corpus/<case>        corpora: empty, no tab, invalid UTF-8, ...
//   OUT/models/good/         a small, valid model directory (random weights)
//   OUT/models/<case>/       that model with one file missing, cut or lying
//   OUT/a-file               a plain file where a directory is expected
//
// Every bad model differs from models/good in exactly one thing, so the error
// a test expects can only come from that thing. The model is built here (a
// Transformer of 8 hidden units on a 30-pair corpus) rather than trained, so
// the table does not depend on training and costs milliseconds.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "../gzip.h"
#include "attn/core/rng.h"
#include "attn/data/nmt.h"
#include "attn/io/dir_lock.h"
#include "attn/io/file_set.h"
#include "attn/io/read_file.h"
#include "attn/nn/transformer.h"
#include "attn/seq2seq/model_dir.h"

namespace fs = std::filesystem;
using namespace attn;

namespace {

fs::path out_dir;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

using attn::testing::gzip;

std::string replace(std::string s, const std::string& from, const std::string& to) {
  std::size_t at = s.find(from);
  if (at == std::string::npos) throw std::runtime_error("make_bad_inputs: no '" + from + "'");
  return s.replace(at, from.size(), to);
}

// ---- corpora ----

const std::string kPairs =
    "Go.\tVa !\nHi.\tSalut !\nRun!\tCours !\nWho?\tQui ?\nWow!\tÇa alors !\nI see.\tJe comprends.\n"
    "I won!\tJ'ai gagné !\nGo on.\tPoursuis.\nHello!\tBonjour !\nI lost.\tJ'ai perdu.\n"
    "I'm home.\tJe suis chez moi.\nHe's calm.\tIl est calme.\nI'm OK.\tJe vais bien.\n"
    "Go now.\tVa, maintenant.\nI paid.\tJ'ai payé.\nWe won.\tNous avons gagné.\n"
    "Help me.\tAide-moi.\nI'm sad.\tJe suis triste.\nCome in.\tEntre.\nI ran.\tJ'ai couru.\n"
    "Be calm.\tSois calme.\nI'm hot.\tJ'ai chaud.\nGo home.\tRentre.\nI quit.\tJ'abandonne.\n"
    "I'm fat.\tJe suis gras.\nI'm up.\tJe suis debout.\nWe lost.\tNous avons perdu.\n"
    "Hug me.\tSerre-moi.\nI fell.\tJe suis tombé.\nSee you.\tÀ plus.\n";

void make_corpora() {
  fs::path c = out_dir / "corpus";
  write(c / "good.txt", kPairs);
  write(c / "empty.txt", "");
  write(c / "blank.txt", "\n\r\n\n");
  // Targets of the word "<pad>" only, ten of them so that <eos> is cut off at
  // num_steps 10: d2l's valid lengths are all 0, there is nothing to learn.
  write(c / "pad_targets.txt",
        "Go.\t<pad> <pad> <pad> <pad> <pad> <pad> <pad> <pad> <pad> <pad>\n"
        "Hi.\t<pad> <pad> <pad> <pad> <pad> <pad> <pad> <pad> <pad> <pad> <pad>\n");
  write(c / "no_tab.txt", replace(kPairs, "Who?\tQui ?", "Who? Qui ?"));  // line 4
  write(c / "bad_utf8.txt", replace(kPairs, "Run!\tCours !", "Run!\tCo\xFFurs !"));  // line 3
  write(c / "huge_line.txt", "Go.\tVa !\n" + std::string(100000, 'a') + "\tb\n");
  // Old Mac line ends: without a check, one long pair.
  write(c / "cr_only.txt", "Go.\tVa !\rHi.\tSalut !\rRun!\tCours !\r");
  // Input for `attn translate` on stdin.
  write(out_dir / "stdin" / "bad_utf8.txt", "go .\ni lost .\nhe's c\xFFlm .\n");  // line 3
  write(out_dir / "stdin" / "huge_line.txt", "go .\n" + std::string(70000, 'a') + "\n");
  write(out_dir / "stdin" / "good.txt", "go .\n\ni lost .\n");
  std::string z = gzip(kPairs);
  write(c / "good.txt.gz", z);
  write(c / "truncated.txt.gz", z.substr(0, z.size() / 2));
  std::string corrupt = z;
  corrupt[corrupt.size() - 6] ^= 0x5A;  // the CRC-32 of the trailer
  write(c / "corrupt.txt.gz", corrupt);
  write(c / "gzip_then_junk.txt.gz", z + "not gzip");
  // A binary file given as a corpus: its first bytes hold a NUL.
  write(c / "binary.safetensors", std::string("\x10\x02\x00\x00\x00\x00\x00\x00{\"x\"", 12));
}

// ---- models ----

void copy_model(const fs::path& from, const fs::path& to) {
  fs::remove_all(to);
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(from))
    if (e.path().filename() != io::kLockFile) fs::copy_file(e.path(), to / e.path().filename());
}

// The good model's manifest with the entries of the files that `d` holds
// now recomputed (a file that is gone keeps its entry, so the manifest
// still lists it).
void reseal(const fs::path& d) {
  io::Manifest m = io::parse_manifest(read(d / io::kManifestFile), "manifest");
  for (auto& e : m.files) {
    std::error_code ec;
    if (!fs::is_regular_file(d / e.name, ec)) continue;
    io::InputFile f((d / e.name).string());
    e.bytes = f.size();
    e.sha256 = f.sha256();
  }
  write(d / io::kManifestFile, io::manifest_to_json(m));
}

// A bad model: a copy of the good one, then `change` applied to its
// directory. Resealed (the default), its manifest vouches for the change, so
// the error comes from the checks of the file's content; unsealed, from the
// manifest.
enum class Seal { resealed, unsealed };
template <class F>
void bad_model(const std::string& name, F&& change, Seal seal = Seal::resealed) {
  fs::path d = out_dir / "models" / name;
  copy_model(out_dir / "models" / "good", d);
  change(d);
  if (seal == Seal::resealed) reseal(d);
}

// The safetensors header as JSON (insertion order kept) and the data after it.
struct Weights {
  nlohmann::ordered_json header;
  std::string data;
};

Weights read_weights(const fs::path& p) {
  std::string bytes = read(p);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return {nlohmann::ordered_json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

std::string weights_bytes(const std::string& header_text, const std::string& data) {
  std::string out(8, '\0');
  std::uint64_t n = header_text.size();
  std::memcpy(out.data(), &n, 8);
  return out + header_text + data;
}

void make_models() {
  fs::path good = out_dir / "models" / "good";
  fs::remove_all(good);
  data::NmtOptions o;
  o.num_examples = 0;
  o.num_steps = 8;
  data::NmtData d = data::load_data_nmt((out_dir / "corpus" / "good.txt").string(), o);
  seq2seq::ModelConfig c;
  c.num_steps = 8;
  c.transformer.src_vocab_size = static_cast<std::int64_t>(d.src_vocab.size());
  c.transformer.tgt_vocab_size = static_cast<std::int64_t>(d.tgt_vocab.size());
  c.transformer.num_hiddens = 8;
  c.transformer.num_layers = 1;
  c.transformer.num_heads = 2;
  c.transformer.ffn_num_hiddens = 16;
  c.transformer.max_len = 64;
  nn::EncoderDecoder net(c.transformer);
  seq2seq::save_model(good.string(), net, c, d.src_vocab, d.tgt_vocab);
  const std::string config = read(good / "config.json");
  const std::string src_vocab = read(good / "src_vocab.txt");
  // The source vocabulary with the token of line `index + 1` replaced.
  auto vocab_with = [&](std::size_t index, const std::string& token) {
    std::string out;
    std::size_t start = 0;
    for (std::size_t i = 0; start < src_vocab.size(); ++i) {
      std::size_t end = src_vocab.find('\n', start);
      out += (i == index ? token : src_vocab.substr(start, end - start)) + "\n";
      start = end + 1;
    }
    return out;
  };

  // config.json
  bad_model("no_config", [](const fs::path& m) { fs::remove(m / "config.json"); });
  bad_model("empty_config", [](const fs::path& m) { write(m / "config.json", ""); });
  bad_model("config_not_json", [&](const fs::path& m) {
    write(m / "config.json", config.substr(0, config.size() / 2));  // cut in the middle
  });
  bad_model("config_not_object",
            [](const fs::path& m) { write(m / "config.json", "[8, 1, 2]\n"); });
  bad_model("config_wrong_type", [&](const fs::path& m) {
    write(m / "config.json", replace(config, "\"num_layers\": 1", "\"num_layers\": \"one\""));
  });
  bad_model("config_negative", [&](const fs::path& m) {
    write(m / "config.json", replace(config, "\"num_hiddens\": 8", "\"num_hiddens\": -8"));
  });
  bad_model("config_zero_heads", [&](const fs::path& m) {
    write(m / "config.json", replace(config, "\"num_heads\": 2", "\"num_heads\": 0"));
  });
  bad_model("config_heads_not_dividing", [&](const fs::path& m) {
    write(m / "config.json", replace(config, "\"num_heads\": 2", "\"num_heads\": 3"));
  });
  bad_model("config_missing_key", [&](const fs::path& m) {
    write(m / "config.json", replace(config, "  \"ffn_num_hiddens\": 16,\n", ""));
  });
  bad_model("config_absurd", [&](const fs::path& m) {
    write(m / "config.json", replace(config, "\"num_hiddens\": 8", "\"num_hiddens\": 65536"));
  });
  bad_model("config_shapes_mismatch", [&](const fs::path& m) {
    write(m / "config.json", replace(config, "\"ffn_num_hiddens\": 16", "\"ffn_num_hiddens\": 24"));
  });
  bad_model("config_more_layers", [&](const fs::path& m) {
    write(m / "config.json", replace(config, "\"num_layers\": 1", "\"num_layers\": 2"));
  });

  // model.safetensors
  const fs::path w = "model.safetensors";
  bad_model("no_weights", [&](const fs::path& m) { fs::remove(m / w); });
  bad_model("empty_weights", [&](const fs::path& m) { write(m / w, ""); });
  bad_model("truncated_weights", [&](const fs::path& m) {
    std::string bytes = read(m / w);
    write(m / w, bytes.substr(0, bytes.size() - 100));
  });
  bad_model("weights_header_too_long", [&](const fs::path& m) {
    std::string bytes = read(m / w);
    const std::uint64_t n = std::uint64_t{1} << 40;
    std::memcpy(bytes.data(), &n, 8);
    write(m / w, bytes);
  });
  bad_model("weights_not_safetensors", [&](const fs::path& m) { write(m / w, config); });
  bad_model("weights_shape_lies", [&](const fs::path& m) {
    Weights x = read_weights(m / w);
    x.header["decoder.dense.bias"]["shape"][0] =
        x.header["decoder.dense.bias"]["shape"][0].get<int>() + 1;
    write(m / w, weights_bytes(x.header.dump(), x.data));
  });
  bad_model("weights_overlap", [&](const fs::path& m) {
    Weights x = read_weights(m / w);
    x.header["encoder.blks.block0.attention.W_q.weight"]["data_offsets"] =
        x.header["encoder.blks.block0.attention.W_k.weight"]["data_offsets"];
    write(m / w, weights_bytes(x.header.dump(), x.data));
  });
  bad_model("weights_past_end", [&](const fs::path& m) {
    Weights x = read_weights(m / w);
    auto& off = x.header["decoder.dense.weight"]["data_offsets"];
    off[0] = off[0].get<std::uint64_t>() + 1000000;
    off[1] = off[1].get<std::uint64_t>() + 1000000;
    write(m / w, weights_bytes(x.header.dump(), x.data));
  });
  bad_model("weights_duplicate_name", [&](const fs::path& m) {
    Weights x = read_weights(m / w);
    std::string text = x.header.dump();
    const std::string key = "\"decoder.dense.bias\":";
    std::size_t at = text.find(key);
    std::string entry = text.substr(at, text.find('}', at) + 1 - at);
    write(m / w, weights_bytes(text.insert(at, entry + ","), x.data));
  });
  bad_model("weights_bf16", [&](const fs::path& m) {
    Weights x = read_weights(m / w);
    x.header["decoder.dense.bias"]["dtype"] = "BF16";
    write(m / w, weights_bytes(x.header.dump(), x.data));
  });
  bad_model("weights_f16", [&](const fs::path& m) {
    Weights x = read_weights(m / w);
    x.header["decoder.dense.bias"]["dtype"] = "F16";
    write(m / w, weights_bytes(x.header.dump(), x.data));
  });
  bad_model("weights_nan", [&](const fs::path& m) {
    Weights x = read_weights(m / w);
    std::uint64_t at = x.header["decoder.dense.bias"]["data_offsets"][0].get<std::uint64_t>();
    const std::uint32_t nan_bits = 0x7FC00000u;
    std::memcpy(x.data.data() + at + 8, &nan_bits, 4);  // element 2
    write(m / w, weights_bytes(x.header.dump(), x.data));
  });
  bad_model("weights_missing_tensor", [&](const fs::path& m) {
    io::TensorMap t = io::load_safetensors((m / w).string());
    t.erase("encoder.blks.block0.addnorm1.ln.weight");
    io::save_safetensors((m / w).string(), t);
  });
  bad_model("weights_bad_json", [&](const fs::path& m) {
    Weights x = read_weights(m / w);
    std::string text = x.header.dump();
    text[text.size() / 2] = '\x01';
    write(m / w, weights_bytes(text, x.data));
  });

  // vocabularies
  const fs::path v = "src_vocab.txt";
  bad_model("no_vocab", [&](const fs::path& m) { fs::remove(m / v); });
  bad_model("empty_vocab", [&](const fs::path& m) { write(m / v, ""); });
  bad_model("vocab_duplicate", [&](const fs::path& m) { write(m / v, vocab_with(4, "<pad>")); });
  bad_model("vocab_no_reserved", [&](const fs::path& m) { write(m / v, vocab_with(3, "<e0s>")); });
  bad_model("vocab_no_unk", [&](const fs::path& m) { write(m / v, vocab_with(0, "<unk0>")); });
  bad_model("vocab_bad_utf8", [&](const fs::path& m) { write(m / v, vocab_with(4, "\xC3\x28")); });
  bad_model("vocab_huge_line",
            [&](const fs::path& m) { write(m / v, vocab_with(4, std::string(70000, 'x'))); });
  bad_model("vocab_size_mismatch", [&](const fs::path& m) { write(m / v, src_vocab + "extra\n"); });
  bad_model("vocab_truncated",
            [&](const fs::path& m) { write(m / v, src_vocab.substr(0, src_vocab.size() - 1)); });
  bad_model("vocab_windows", [&](const fs::path& m) {
    std::string crlf;
    for (char ch : src_vocab) crlf += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
    write(m / v, crlf);
  });

  // Files that do not belong together: edited, swapped or copied from
  // another model without a new manifest; and the manifest itself.
  bad_model(
      "config_edited",
      [&](const fs::path& m) {
        write(m / "config.json", replace(config, "\"num_heads\": 2", "\"num_heads\": 4"));
      },
      Seal::unsealed);
  bad_model(
      "vocab_swapped",
      [&](const fs::path& m) {
        // lines 5 and 6 swapped: the same bytes in another order
        std::string b;
        std::vector<std::string> lines;
        std::size_t start = 0;
        while (start < src_vocab.size()) {
          std::size_t end = src_vocab.find('\n', start);
          lines.push_back(src_vocab.substr(start, end - start));
          start = end + 1;
        }
        std::swap(lines[4], lines[5]);
        for (const auto& l : lines) b += l + "\n";
        write(m / v, b);
      },
      Seal::unsealed);
  bad_model(
      "weights_of_another_model",
      [&](const fs::path& m) {
        manual_seed(12345);  // other random weights of the same shapes
        nn::EncoderDecoder other(c.transformer);
        io::TensorMap t;
        for (auto& [name, p] : other.named_parameters()) t.emplace(name, p.detach());
        io::save_safetensors((m / w).string(), t, {{"format", "pt"}});
      },
      Seal::unsealed);
  bad_model(
      "no_manifest", [](const fs::path& m) { fs::remove(m / io::kManifestFile); }, Seal::unsealed);
  bad_model(
      "manifest_not_json", [](const fs::path& m) { write(m / io::kManifestFile, "{\"format\": "); },
      Seal::unsealed);
  bad_model(
      "config_symlink_loop",
      [](const fs::path& m) {
        fs::remove(m / "config.json");
        fs::create_symlink("config.json", m / "config.json");
      },
      Seal::unsealed);

  write(out_dir / "a-file", "not a directory\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_bad_inputs OUT\n";
    return 2;
  }
  try {
    out_dir = argv[1];
    fs::create_directories(out_dir);
    make_corpora();
    make_models();
  } catch (const std::exception& e) {
    std::cerr << "make_bad_inputs: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
