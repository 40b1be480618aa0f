// attn/data/text.h — reading corpora and d2l's text preprocessing.
//
// Errors are IOErrors of one line that name the file (and the line, where
// there is one): "'fra.txt' line 12: no tab between source and target: 'hello'".
// Functions that take a `path` quote it themselves; functions that take a
// `what` print it as given (file readers pass the quoted path, the CLI passes
// labels such as "translate: input").
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attn/io/json.h"
#include "attn/io/line_reader.h"

namespace attn::data {

// What attn accepts as text: at most kMaxTextBytes in a file (after
// decompression) and at most kMaxLineBytes in one line of a corpus or of a
// vocabulary. A sentence pair of 64 KiB is already far from a sentence; a
// longer line is a wrong file, not data.
inline constexpr std::size_t kMaxTextBytes = std::size_t{1} << 30;
inline constexpr std::size_t kMaxLineBytes = std::size_t{1} << 16;

// "'path'": how errors name a file.
std::string quote_path(std::string_view path);

// At most `max` bytes of `text` for an error message: cut at a UTF-8
// character boundary, control characters shown as '?', "..." when cut.
using io::printable_excerpt;  // (io/json.h)

// The bytes of a file, as they are. IOError when it is missing, a directory,
// unreadable or larger than kMaxTextBytes.
std::string read_file_bytes(const std::string& path);

// Text from a file's bytes: gzip data (recognized by its magic bytes 1F 8B;
// several members are concatenated, as gzip -d does) is decompressed, anything
// else is returned as it is. IOError "<what>: ..." for truncated or corrupt
// gzip data, bytes after the last gzip member, more than kMaxTextBytes of text,
// and empty text ("<what> is empty").
std::string decode_text(std::string_view bytes, std::string_view what);

// read_file_bytes + decode_text: the whole file as text, gzip or plain.
std::string read_text_file(const std::string& path);

// A corpus as text: its lines 0..num_examples (all when num_examples <= 0),
// read as a stream (a regular file, a FIFO, /dev/stdin; gzip or plain) with
// every limit checked while reading: at most kMaxLineBytes per line, at most
// kMaxTextBytes in all, no CR-only line ends. Lines end with '\n' ("\r\n"
// becomes "\n"). The rest of the file is not read. IOError as decode_text and
// io::LineReader ("'fra.txt' line 2: 70000 bytes long, more than the limit of
// 65536 bytes per line"), and "'x' is empty".
std::string read_corpus_text(const std::string& path, long num_examples);
// The same from any source of bytes (`what` names it in errors).
std::string read_corpus_text(std::unique_ptr<io::ByteSource> source, const std::string& what,
                             long num_examples);

// IOError "<what> line L: invalid UTF-8 at byte B of the line (0xC3)" unless
// `text` is valid UTF-8 (no overlong forms, surrogates or values past
// U+10FFFF); a NUL byte is refused too ("not a text file"). Lines are
// counted from `first_line` (for text that is part of a longer stream).
void check_utf8(std::string_view text, std::string_view what, std::size_t first_line = 1);

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
// as in newer releases of the corpus, are ignored); a trailing '\r' is
// dropped and empty lines are skipped. IOError naming `what` and the line
// number for a non-empty line without a tab or longer than kMaxLineBytes.
ParallelCorpus tokenize_nmt(std::string_view text, long num_examples, std::string_view what);

}  // namespace attn::data
