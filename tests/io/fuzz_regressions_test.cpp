// The fuzz targets' inputs in the normal build: every seed (fuzz/seeds/<target>/)
// and every input a fuzzer or a review once failed on (fuzz/regressions/<target>/)
// goes through the fuzz target's own function (fuzz/entries.h). Each must be
// rejected with a clear IOError or accepted with every invariant holding; a
// crash or a sanitizer report fails the test as well (it runs in the ASan build).
#include <algorithm>
#include <filesystem>
#include <functional>

// tests/ is on the include path, so this is <repository>/fuzz/entries.h.
#include "../fuzz/entries.h"
#include "testing.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> inputs_of(const std::string& kind, const std::string& target) {
  std::vector<fs::path> out;
  fs::path dir = fs::path(ATTN_SOURCE_DIR) / "fuzz" / kind / target;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Feeds every input of `target`; returns how many there were.
std::size_t feed(const std::string& kind, const std::string& target,
                 const std::function<void(std::string_view)>& entry) {
  auto files = inputs_of(kind, target);
  for (const auto& f : files) {
    std::string bytes = attn::testing::read_file(f);
    try {
      entry(bytes);
    } catch (const attn::fuzz::Finding& e) {
      ADD_FAILURE() << f << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << f << ": an exception other than IOError escaped: " << e.what();
    }
  }
  return files.size();
}

}  // namespace

TEST(FuzzRegressions, SafetensorsSeedsAndFindings) {
  EXPECT_GE(feed("seeds", "safetensors", attn::fuzz::safetensors), 3u);
  feed("regressions", "safetensors", attn::fuzz::safetensors);
}

TEST(FuzzRegressions, ModelConfigSeedsAndFindings) {
  EXPECT_GE(feed("seeds", "model_config", attn::fuzz::model_config), 3u);
  feed("regressions", "model_config", attn::fuzz::model_config);
}

TEST(FuzzRegressions, CorpusSeedsAndFindings) {
  EXPECT_GE(feed("seeds", "corpus", attn::fuzz::corpus), 4u);
  feed("regressions", "corpus", attn::fuzz::corpus);
}

// The entries themselves report what they should: a broken invariant is a
// Finding, a rejection must name the input.
TEST(FuzzRegressions, EntriesRejectOnlyWithClearErrors) {
  EXPECT_THROW(attn::fuzz::expect(false, "t", "x"), attn::fuzz::Finding);
  EXPECT_NO_THROW(attn::fuzz::expect_clear(attn::IOError("'a.txt' is empty"), "t", "'a.txt'"));
  EXPECT_THROW(attn::fuzz::expect_clear(attn::IOError("something is empty"), "t", "'a.txt'"),
               attn::fuzz::Finding);
  EXPECT_THROW(attn::fuzz::expect_clear(attn::IOError("'a.txt'\nis empty"), "t", "'a.txt'"),
               attn::fuzz::Finding);
  // Rejections are quiet: none of these throws.
  EXPECT_NO_THROW(attn::fuzz::safetensors("not a safetensors file"));
  EXPECT_NO_THROW(attn::fuzz::model_config("{\"format\": 1}"));
  EXPECT_NO_THROW(attn::fuzz::corpus(std::string("\x80\x05", 2) + "go .\tva !\n"));
}
