#include "attn/io/safetensors.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "testing.h"

using namespace attn;
using namespace attn::io;

namespace {
std::string bytes_with_header(const std::string& json, const std::string& data) {
  std::uint64_t n = json.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + json + data;
}

std::string error_of(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "m.safetensors");
  } catch (const IOError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(Safetensors, RoundTripAllDtypesAndMetadata) {
  std::string path = ::testing::TempDir() + "rt.safetensors";
  TensorMap m;
  m["a.weight"] =
      arange(0.0, 6.0, 1.0, DType::f32).reshape({2, 3}).transpose(0, 1);  // non-contiguous
  m["b"] = full({3}, 2.5, DType::f64);
  m["c"] = arange(4, DType::i32);
  m["d"] = arange(5, DType::i64);
  m["empty"] = zeros({0, 4});
  save_safetensors(path, m, {{"format", "pt"}});
  Metadata meta;
  TensorMap r = load_safetensors(path, &meta);
  EXPECT_EQ(meta["format"], "pt");
  ASSERT_EQ(r.size(), 5u);
  for (auto& [k, t] : m) {
    EXPECT_EQ(r[k].shape(), t.shape()) << k;
    EXPECT_EQ(r[k].dtype(), t.dtype()) << k;
    EXPECT_EQ(to_vector<double>(r[k]), to_vector<double>(t)) << k;
  }
  // The header length is 8-aligned and the data starts right after it.
  std::ifstream f(path, std::ios::binary);
  std::uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
}

TEST(Safetensors, RejectsEveryLie) {
  std::string ok = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(error_of(bytes_with_header(ok, std::string(8, '\0'))), "no error");
  EXPECT_EQ(error_of("abc"),
            "'m.safetensors': not a safetensors file (3 bytes, too short for the header length)");
  std::string huge(8, '\xff');
  EXPECT_NE(error_of(huge).find("exceeds the limit"), std::string::npos);
  EXPECT_NE(error_of(bytes_with_header(ok, std::string(8, '\0')).substr(0, 20)).find("truncated"),
            std::string::npos);
  EXPECT_NE(error_of(bytes_with_header("{not json", "")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(bytes_with_header("[1,2]", "")).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(bytes_with_header(R"({"x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})",
                                       std::string(4, '\0')))
                .find("unsupported dtype"),
            std::string::npos);
  EXPECT_EQ(error_of(bytes_with_header(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                                       std::string(8, '\0'))),
            "'m.safetensors': tensor 'x' of shape [3] and dtype F32 needs 12 bytes but "
            "data_offsets give 8");
  EXPECT_NE(error_of(bytes_with_header(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                                       std::string(4, '\0')))
                .find("data section has 4 bytes"),
            std::string::npos);
  EXPECT_NE(error_of(bytes_with_header(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                       R"("y":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                       std::string(4, '\0')))
                .find("overlaps"),
            std::string::npos);
  EXPECT_NE(error_of(bytes_with_header(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                       std::string(8, '\0')))
                .find("hole"),
            std::string::npos);
  EXPECT_NE(error_of(bytes_with_header(ok, std::string(12, '\0'))).find("not described"),
            std::string::npos);
  EXPECT_EQ(error_of(bytes_with_header(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                       R"("x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                       std::string(8, '\0'))),
            "'m.safetensors': tensor 'x' appears twice in the safetensors header");
  EXPECT_NE(error_of(bytes_with_header(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
                                       std::string(4, '\0')))
                .find("invalid dimension"),
            std::string::npos);
  EXPECT_NE(
      error_of(bytes_with_header(R"({"x":{"dtype":"F32","shape":[1]}})", "")).find("needs dtype"),
      std::string::npos);
  EXPECT_THROW(load_safetensors("/nonexistent/model.safetensors"), IOError);
}

TEST(Safetensors, HostileHeadersGiveShortOneLineErrors) {
  // An empty name, too many dimensions, values nested deep.
  EXPECT_EQ(
      error_of(bytes_with_header(R"({"":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", "")),
      "'m.safetensors': a tensor with an empty name");
  std::string rank33 = "[";
  for (int i = 0; i < 33; ++i) rank33 += i ? ",1" : "1";
  rank33 += "]";
  EXPECT_EQ(error_of(bytes_with_header(
                R"({"x":{"dtype":"F32","shape":)" + rank33 + R"(,"data_offsets":[0,4]}})",
                std::string(4, '\0'))),
            "'m.safetensors': tensor 'x' has 33 dimensions, more than the 32 attn reads");
  std::string deep = std::string(5000, '[') + std::string(5000, ']');
  EXPECT_EQ(error_of(bytes_with_header(
                R"({"x":{"dtype":)" + deep + R"(,"shape":[1],"data_offsets":[0,4]}})",
                std::string(4, '\0'))),
            "'m.safetensors': tensor 'x' has unsupported dtype a list of 1 items (attn reads F32, "
            "F64, I32, I64, BF16, I8)");
  // A name with a newline and 200 bytes: cut, and the newline shown as '?'.
  std::string name = "a\\n" + std::string(200, 'b');
  std::string err = error_of(
      bytes_with_header(R"({")" + name + R"(":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
                        std::string(4, '\0')));
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  EXPECT_NE(err.find("tensor 'a?" + std::string(78, 'b') + "...' of shape [2]"), std::string::npos)
      << err;
  // Offsets that are not [begin, end].
  EXPECT_EQ(
      error_of(bytes_with_header(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})",
                                 std::string(8, '\0'))),
      "'m.safetensors': tensor 'x' has invalid data_offsets (a list of 3 items; expected "
      "[begin, end])");
  EXPECT_EQ(
      error_of(bytes_with_header(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", "")),
      "'m.safetensors': tensor 'x' has invalid data_offsets (a list of 2 items; expected "
      "[begin, end])");
  // Offsets near 2^64 do not wrap around.
  EXPECT_NE(
      error_of(
          bytes_with_header(
              R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,0]}})", ""))
          .find("claims bytes [18446744073709551612, 0)"),
      std::string::npos);
  EXPECT_NE(
      error_of(bytes_with_header(R"({"x":{"dtype":"F32","shape":[1099511627775,1099511627775],)"
                                 R"("data_offsets":[0,4]}})",
                                 std::string(4, '\0')))
          .find("impossibly large"),
      std::string::npos);
  // JSON errors are one line too, even for a control character in the header.
  err = error_of(bytes_with_header("{\"x\n", ""));
  EXPECT_NE(err.find("the safetensors header is not valid JSON"), std::string::npos);
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST(Safetensors, SerializeIsWhatSaveWritesAndParseReadsBack) {
  TensorMap m;
  m["w"] = arange(0.0, 6.0, 1.0, DType::f32).reshape({2, 3});
  m["n"] = arange(3, DType::i64);
  std::string bytes = serialize_safetensors(m, {{"format", "pt"}});
  std::string path = ::testing::TempDir() + "ser.safetensors";
  save_safetensors(path, m, {{"format", "pt"}});
  EXPECT_EQ(attn::testing::read_file(path), bytes);
  Metadata meta;
  TensorMap r = parse_safetensors(bytes, "x", &meta);
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(to_vector<double>(r.at("w")), to_vector<double>(m.at("w")));
  EXPECT_THROW(serialize_safetensors({{"", m.at("w")}}), ValueError);
  // Streamed with a digest, and from a view that is not contiguous: the same
  // bytes as serialized.
  m["t"] = arange(0.0, 12.0, 1.0, DType::f32).reshape({3, 4}).transpose(0, 1);
  save_safetensors(path, m, {{"format", "pt"}}, /*with_digest=*/true);
  EXPECT_EQ(attn::testing::read_file(path),
            serialize_safetensors(m, {{"format", "pt"}}, /*with_digest=*/true));
  EXPECT_NO_THROW(load_safetensors(path));
}

TEST(Safetensors, LoadNamesTheFileForEveryReadError) {
  std::string dir = ::testing::TempDir();
  try {
    load_safetensors(dir);
    FAIL();
  } catch (const IOError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read '" + dir + "': it is a directory");
  }
  try {
    load_safetensors("/nonexistent/model.safetensors");
    FAIL();
  } catch (const IOError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot open '/nonexistent/model.safetensors': No such file or directory");
  }
  std::string empty = dir + "empty.safetensors";
  std::ofstream(empty, std::ios::binary).flush();
  try {
    load_safetensors(empty);
    FAIL();
  } catch (const IOError& e) {
    EXPECT_EQ(std::string(e.what()),
              "'" + empty + "': not a safetensors file (0 bytes, too short for the header length)");
  }
}

// f32 tensors stored as BF16 (rounded to the nearest, ties to even) and I8
// (whole numbers only) come back as f32, exactly the stored values; the
// reader names them; a digest covers the stored bytes.
TEST(Safetensors, Bf16AndI8StorageRoundTrip) {
  TensorMap m;
  // 1 + 2^-8 is a tie between bfloat16's 1 and 1 + 2^-7: to even, 1.
  // 1 + 3 x 2^-8 ties between 1 + 2^-7 and 1 + 2^-6: to even, 1 + 2^-6.
  m["w"] = from_vector(
      std::vector<float>{1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f, 0.0f, 1e-3f, 3.0e38f},
      {2, 3});
  m["q"] = from_vector(std::vector<float>{-128, 127, 0, -1, 5, 64}, {3, 2});
  m["kept"] = from_vector(std::vector<float>{0.1f, 0.2f});
  const StoredTypes narrow = {{"w", StoredAs::bf16}, {"q", StoredAs::i8}};
  for (bool digest : {false, true}) {
    const std::string bytes = serialize_safetensors(m, {}, digest, narrow);
    // 6 x 2 + 6 x 1 + 2 x 4 bytes of data after the header.
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    EXPECT_EQ(bytes.size() - 8 - n, 26u);
    StoredTypes stored;
    TensorMap r = parse_safetensors(bytes, "n.safetensors", nullptr, &stored);
    EXPECT_EQ(stored, narrow);
    EXPECT_EQ(r["w"].dtype(), DType::f32);
    const std::vector<float> w = to_vector<float>(r["w"]);
    EXPECT_EQ(w[0], 1.0f);
    EXPECT_EQ(w[1], 1.0f + 1.0f / 64);
    EXPECT_EQ(w[2], -2.5f);
    EXPECT_EQ(w[3], 0.0f);
    EXPECT_NEAR(w[4], 1e-3f, 1e-3f / 128);
    EXPECT_NEAR(w[5], 3.0e38f, 3.0e38f / 128);
    EXPECT_EQ(to_vector<float>(r["q"]), to_vector<float>(m["q"]));
    EXPECT_EQ(to_vector<float>(r["kept"]), to_vector<float>(m["kept"]));
    EXPECT_EQ(stored.count("kept"), 0u);
  }
  // The digest is over the stored bytes: one flipped I8 value is refused.
  std::string bytes = serialize_safetensors(m, {}, true, narrow);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  bytes[8 + n + 2 * 4 + 3] ^= 1;  // "kept" (8 bytes) sorts first, then "q"
  try {
    parse_safetensors(bytes, "n.safetensors");
    ADD_FAILURE() << "a changed I8 value was read";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("does not match the sha256"), std::string::npos);
  }
}

TEST(Safetensors, NarrowStorageRefusesWhatItCannotHold) {
  TensorMap m;
  m["f"] = from_vector(std::vector<float>{1.5f, 2.0f});
  m["big"] = from_vector(std::vector<float>{128.0f});
  m["d"] = full({2}, 1.0, DType::f64);
  auto error = [&](const StoredTypes& narrow) -> std::string {
    try {
      serialize_safetensors(m, {}, false, narrow);
    } catch (const ValueError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(std::string(error({{"f", StoredAs::i8}}))
                .find("tensor 'f' holds 1.5 at 0, not a whole number in [-128, 127]"),
            std::string::npos);
  EXPECT_NE(std::string(error({{"big", StoredAs::i8}})).find("holds 128 at 0"), std::string::npos);
  EXPECT_NE(std::string(error({{"d", StoredAs::bf16}}))
                .find("tensor 'd' is f64, and only f32 tensors are stored as BF16"),
            std::string::npos);
  EXPECT_NE(std::string(error({{"none", StoredAs::bf16}}))
                .find("tensor 'none' to store as BF16 is not among the tensors"),
            std::string::npos);
  // A file whose BF16 tensor has the bytes of an F32 one is a lie, named.
  const std::string json = R"({"x":{"dtype":"BF16","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_NE(std::string(error_of(bytes_with_header(json, std::string(8, '\0'))))
                .find("dtype BF16 needs 4 bytes but data_offsets give 8"),
            std::string::npos);
}
