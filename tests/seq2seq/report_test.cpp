// The end-of-run report (seq2seq/report.h): pictures bounded in size.
#include "attn/seq2seq/report.h"

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
