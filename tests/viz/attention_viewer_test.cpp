// The attention viewer's page (viz/attention_viewer.h): the data and the first
// view embedded as given, no token able to end its script element, bad input
// refused. What the page does in a browser is tested by
// tests/apps/attention_viewer_test.py (headless Chromium).
#include "attn/viz/attention_viewer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "attn/core/error.h"

using namespace attn;

namespace {

// The text of <script type="application/json" id="...">...</script>.
std::string script_text(const std::string& page, const std::string& id) {
  const std::string open = "<script type=\"application/json\" id=\"" + id + "\">";
  const std::size_t at = page.find(open);
  if (at == std::string::npos) return "";
  const std::size_t from = at + open.size();
  return page.substr(from, page.find("</script>", from) - from);
}

const char* kData =
    R"({"source":"a </script><!-- b","translation":"ATTN_VIEW_JSON","source_tokens":["</script>","<eos>"],)"
    R"("target_tokens":["<bos>"],"num_layers":1,"num_heads":1,)"
    R"("attention":{"encoder":[],"decoder_self":[],"decoder_cross":[[[[0.25,0.75]]]]}})";

}  // namespace

TEST(AttentionViewer, EmbedsTheDataAndTheViewAsGiven) {
  const std::string page =
      viz::attention_viewer_html(kData, {.layer = 1, .head = 1, .kind = "decoder_cross"});
  // One script element each; the tokens' "</script>" and "<!--" escaped.
  EXPECT_EQ(page.find("</script><!--"), std::string::npos);
  const std::string data = script_text(page, "attn-data");
  EXPECT_EQ(data.find('<'), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(data), nlohmann::json::parse(kData));
  EXPECT_EQ(nlohmann::json::parse(script_text(page, "attn-view")),
            nlohmann::json::parse(R"({"layer":1,"head":1,"kind":"decoder_cross"})"));
  // All heads by default; the markers are gone (a token holding one's text stays).
  const std::string mean = viz::attention_viewer_html(kData);
  EXPECT_EQ(nlohmann::json::parse(script_text(mean, "attn-view"))["head"], "all");
  EXPECT_EQ(mean.find("ATTN_DATA_JSON"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(script_text(mean, "attn-data"))["translation"], "ATTN_VIEW_JSON");
}

TEST(AttentionViewer, NeedsNoNetwork) {
  const std::string page = viz::attention_viewer_html(kData);
  // The only URL is the SVG namespace's name, which is never fetched.
  const std::regex url(R"(https?://[^\s"'<>)]+)");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), url); it != std::sregex_iterator();
       ++it)
    EXPECT_EQ(it->str(), "http://www.w3.org/2000/svg");
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("@import"), std::string::npos);
  EXPECT_FALSE(std::regex_search(page, std::regex(R"(\bsrc\s*=)")));
}

TEST(AttentionViewer, RefusesWhatIsNotAttentionData) {
  EXPECT_THROW(viz::attention_viewer_html("not json"), ValueError);
  EXPECT_THROW(viz::attention_viewer_html("[1, 2]"), ValueError);
  EXPECT_THROW(viz::attention_viewer_html(R"({"source": "x"})"), ValueError);
  EXPECT_THROW(viz::attention_viewer_html(R"({"attention": {"encoder": 3}})"), ValueError);
  EXPECT_THROW(viz::attention_viewer_html(kData, {.kind = "bahdanau"}), ValueError);
}
