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
  EXPECT_NE(error_of(bytes_with_header(R"({"x":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})",
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
