// docs/using-libattn.md shows code; examples/consumer/guide.cpp compiles and
// runs the same code against an installed libattn (the test consumer_install).
// This test keeps the two equal: every C++ block of the guide is one snippet of
// guide.cpp (the lines between two `// [name]` lines, indentation removed),
// word for word, and every snippet of guide.cpp is shown in the guide.
#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "testing.h"

namespace fs = std::filesystem;

namespace {

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The lines without their common leading spaces, joined by '\n'.
std::string dedent(const std::vector<std::string>& lines) {
  std::size_t indent = std::string::npos;
  for (const std::string& l : lines)
    if (l.find_first_not_of(' ') != std::string::npos)
      indent = std::min(indent, l.find_first_not_of(' '));
  std::string out;
  for (const std::string& l : lines)
    out += (l.size() >= indent && indent != std::string::npos ? l.substr(indent) : l) + "\n";
  return out;
}

// The ```cpp blocks of a Markdown file.
std::vector<std::string> markdown_cpp_blocks(const fs::path& path) {
  std::vector<std::string> blocks;
  std::vector<std::string> block;
  bool inside = false;
  for (const std::string& line : read_lines(path)) {
    if (!inside && line == "```cpp") {
      inside = true;
      block.clear();
    } else if (inside && line == "```") {
      inside = false;
      blocks.push_back(dedent(block));
    } else if (inside) {
      block.push_back(line);
    }
  }
  EXPECT_FALSE(inside) << path << ": a ```cpp block is not closed";
  return blocks;
}

// name -> the lines between the two `// [name]` lines of a source file.
std::map<std::string, std::string> source_snippets(const fs::path& path) {
  static const std::regex marker(R"(^ *// \[([a-z-]+)\]$)");
  std::map<std::string, std::string> snippets;
  std::string open;
  std::vector<std::string> body;
  for (const std::string& line : read_lines(path)) {
    std::smatch m;
    if (std::regex_match(line, m, marker)) {
      if (open.empty()) {
        open = m[1];
        body.clear();
      } else {
        EXPECT_EQ(m[1], open) << path << ": snippet [" << open << "] closed by [" << m[1] << "]";
        EXPECT_EQ(snippets.count(open), 0u) << path << ": snippet [" << open << "] twice";
        snippets[open] = dedent(body);
        open.clear();
      }
    } else if (!open.empty()) {
      body.push_back(line);
    }
  }
  EXPECT_TRUE(open.empty()) << path << ": snippet [" << open << "] is not closed";
  return snippets;
}

}  // namespace

TEST(GuideSnippets, EveryCodeBlockOfTheGuideIsCompiledAndRunByTheConsumer) {
  const fs::path root(ATTN_SOURCE_DIR);
  const std::vector<std::string> blocks = markdown_cpp_blocks(root / "docs" / "using-libattn.md");
  const std::map<std::string, std::string> snippets =
      source_snippets(root / "examples" / "consumer" / "guide.cpp");
  ASSERT_GE(snippets.size(), 6u) << "guide.cpp: tensors, autograd, module, training loop, ...";
  std::map<std::string, int> shown;
  for (const std::string& block : blocks) {
    auto it = std::find_if(snippets.begin(), snippets.end(),
                           [&](const auto& s) { return s.second == block; });
    if (it == snippets.end()) {
      ADD_FAILURE() << "docs/using-libattn.md shows code that examples/consumer/guide.cpp does "
                       "not have between two `// [name]` lines:\n"
                    << block;
      continue;
    }
    ++shown[it->first];
  }
  for (const auto& [name, code] : snippets)
    EXPECT_EQ(shown[name], 1) << "guide.cpp's snippet [" << name
                              << "] is not shown exactly once in docs/using-libattn.md";
}
