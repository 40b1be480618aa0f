// attn/data/text.h — reading corpora and d2l's text preprocessing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace attn::data {

// The whole file as bytes; gzip-compressed files (by their magic bytes) are
// decompressed. Throws IOError naming the path when it is missing,
// unreadable, corrupt or empty.
std::string read_text_file(const std::string& path);

// Throws IOError "<what>: invalid UTF-8 at line L, byte B" unless `text` is valid UTF-8.
void check_utf8(std::string_view text, std::string_view what);

// Unicode lowercase (simple case mapping of every code point), UTF-8 in and out.
std::string to_lower_utf8(std::string_view text);

// d2l's preprocess_nmt: U+202F and U+00A0 become ' ', the text is lowercased,
// and a space is put before each of , . ! ? not already preceded by one.
std::string preprocess_nmt(std::string_view text);

// Splits on every single ' ' (so "a  b" gives "a", "", "b", as Python's split(' ')).
std::vector<std::string> split_spaces(std::string_view line);

using Tokens = std::vector<std::string>;

struct ParallelCorpus {
  std::vector<Tokens> source, target;
};

// d2l's tokenize_nmt: line i (0-based) is read while i <= num_examples (so
// num_examples = 600 reads 601 lines, as d2l's loop does); num_examples <= 0
// reads all. Each line is "source<TAB>target" (further tab-separated columns,
// as in newer releases of the corpus, are ignored); a non-empty line without a
// tab is an IOError naming `what` and the line number.
ParallelCorpus tokenize_nmt(std::string_view text, long num_examples, std::string_view what);

}  // namespace attn::data
