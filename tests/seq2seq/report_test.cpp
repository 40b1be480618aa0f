// The end-of-run report (seq2seq/report.h): pictures bounded in size, the weights as JSON.
#include "attn/seq2seq/report.h"

#include <nlohmann/json.hpp>

#include "testing.h"

using namespace attn;
namespace fs = std::filesystem;

class ReportTest : public attn::testing::TempDirTest {};

// A translation of 300 tokens (a model that never says <eos>, num_steps
// 300): the pictures show the first kMaxPictureTokens tokens and say so.
TEST_F(ReportTest, AttentionPicturesAreCutToTheirFirstTokens) {
  const std::int64_t n = 300, heads = 2;
  seq2seq::AttentionMaps maps;
  for (std::int64_t i = 0; i < n; ++i) {
    maps.source_tokens.push_back(fmt::format("s{}", i));
    maps.target_tokens.push_back(fmt::format("t{}", i));
  }
  for (int layer = 0; layer < 2; ++layer) {
    maps.encoder.push_back(attn::testing::rand32({heads, n, n}, 1, 0, 1));
    maps.decoder_self.push_back(attn::testing::rand32({heads, n, n}, 2, 0, 1));
    maps.decoder_cross.push_back(attn::testing::rand32({heads, n, n}, 3, 0, 1));
  }
  const seq2seq::AttentionMaps cut = seq2seq::first_tokens(maps, seq2seq::kMaxPictureTokens);
  EXPECT_EQ(cut.source_tokens.size(), 64u);
  EXPECT_EQ(cut.source_tokens.back(), "s63");
  EXPECT_EQ(shape_str(cut.encoder[1].shape()), "[2, 64, 64]");
  EXPECT_EQ(shape_str(cut.decoder_cross[0].shape()), "[2, 64, 64]");
  EXPECT_EQ(to_vector<float>(cut.decoder_self[0].select(0, 1).select(0, 5).slice(0, 0, 3)),
            to_vector<float>(maps.decoder_self[0].select(0, 1).select(0, 5).slice(0, 0, 3)));
  const std::string stem = (dir_ / "att").string();
  seq2seq::save_attention_figures(maps, heads, stem);
  // The PNG's width and height (big-endian at bytes 16..23) stay bounded.
  const std::string png = attn::testing::read_file(stem + "-encoder.png");
  ASSERT_GT(png.size(), 24u);
  auto be32 = [&](std::size_t at) {
    return (static_cast<unsigned>(static_cast<unsigned char>(png[at])) << 24) |
           (static_cast<unsigned>(static_cast<unsigned char>(png[at + 1])) << 16) |
           (static_cast<unsigned>(static_cast<unsigned char>(png[at + 2])) << 8) |
           static_cast<unsigned>(static_cast<unsigned char>(png[at + 3]));
  };
  EXPECT_LT(be32(16), 4000u);
  EXPECT_LT(be32(20), 4000u);
  // Short sentences are drawn whole, with their own title.
  seq2seq::AttentionMaps small;
  small.source_tokens = {"go", ".", "<eos>"};
  small.target_tokens = {"<bos>", "va", "!"};
  small.encoder = {attn::testing::rand32({heads, 3, 3}, 4, 0, 1)};
  small.decoder_self = {attn::testing::rand32({heads, 3, 3}, 5, 0, 1)};
  small.decoder_cross = {attn::testing::rand32({heads, 3, 3}, 6, 0, 1)};
  seq2seq::save_attention_figures(small, heads, (dir_ / "small").string());
  EXPECT_EQ(seq2seq::first_tokens(small, 64).source_tokens, small.source_tokens);
  EXPECT_TRUE(fs::exists(dir_ / "small-decoder-cross.png"));
}

// attention_maps_json: every weight reads back as the same float, in
// [layer][head][query][key] order, with the tokens; a kind the model lacks is
// an empty list and the sizes come from the first kind that has weights.
TEST_F(ReportTest, AttentionJsonHoldsEveryWeightExactly) {
  seq2seq::AttentionMaps maps;
  maps.source_tokens = {"i'm", "home", ".", "<eos>"};
  maps.target_tokens = {"<bos>", "je", "</script>"};
  for (int layer = 0; layer < 2; ++layer) {
    // Weights of every magnitude, subnormal to 1.
    Tensor w = attn::testing::rand32({3, 3, 4}, 10 + layer, 0, 1);
    float* p = w.data<float>();
    p[1] = 1.1206711e-34f;
    p[2] = 1e-45f;
    p[3] = 1;
    p[5] = 0.1f;
    maps.decoder_cross.push_back(w);
  }
  const std::string text = seq2seq::attention_maps_json(maps, "i'm home .", "je \"x\"");
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["translation"], "je \"x\"");
  EXPECT_EQ(j["target_tokens"][2], "</script>");
  EXPECT_EQ(j["num_layers"], 2);
  EXPECT_EQ(j["num_heads"], 3);
  EXPECT_TRUE(j["attention"]["encoder"].empty());
  EXPECT_TRUE(j["attention"]["decoder_self"].empty());
  const auto& cross = j["attention"]["decoder_cross"];
  ASSERT_EQ(cross.size(), 2u);
  for (std::size_t l = 0; l < 2; ++l) {
    const std::vector<float> want = to_vector<float>(maps.decoder_cross[l]);
    std::size_t i = 0;
    ASSERT_EQ(cross[l].size(), 3u);
    for (const auto& head : cross[l]) {
      ASSERT_EQ(head.size(), 3u);
      for (const auto& row : head) {
        ASSERT_EQ(row.size(), 4u);
        for (const auto& v : row) {
          EXPECT_EQ(static_cast<float>(v.get<double>()), want[i])
              << "layer " << l << " index " << i;
          ++i;
        }
      }
    }
  }
  // No digits beyond what the float needs: 0.1f is written "0.1", not as a double.
  EXPECT_NE(text.find(",0.1,"), std::string::npos) << text.substr(0, 300);
}
