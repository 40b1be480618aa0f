#include "attn/data/text.h"

#include <locale.h>
#include <wctype.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "attn/core/error.h"
#include "attn/io/line_reader.h"
#include "attn/io/read_file.h"

namespace attn::data {

std::string quote_path(std::string_view path) { return fmt::format("'{}'", path); }

std::string read_file_bytes(const std::string& path) {
  return io::read_file_bytes(path, kMaxTextBytes);
}

std::string decode_text(std::string_view bytes, std::string_view what) {
  auto source = io::text_source(io::memory_source(bytes), std::string(what), kMaxTextBytes);
  std::string text;
  std::vector<char> buf(1 << 16);
  for (std::size_t got; (got = source->read(buf.data(), buf.size())) > 0;)
    text.append(buf.data(), got);
  ATTN_CHECK(!text.empty(), IOError, "{} is empty", what);
  return text;
}

std::string read_corpus_text(const std::string& path, long num_examples) {
  const std::string what = quote_path(path);
  return read_corpus_text(io::open_file_source(path), what, num_examples);
}

std::string read_corpus_text(std::unique_ptr<io::ByteSource> source, const std::string& what,
                             long num_examples) {
  io::LineReader lines(io::text_source(std::move(source), what, kMaxTextBytes), what,
                       kMaxLineBytes);
  std::string text, line;
  while ((num_examples <= 0 || static_cast<long>(lines.line_number()) <= num_examples) &&
         lines.next(line)) {
    text += line;
    if (lines.ended_with_newline()) text += '\n';
  }
  ATTN_CHECK(!text.empty(), IOError, "{} is empty", what);
  return text;
}

std::string read_text_file(const std::string& path) {
  return decode_text(read_file_bytes(path), quote_path(path));
}

void check_utf8(std::string_view s, std::string_view what, std::size_t first_line) {
  std::size_t line = first_line, line_start = 0, i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80           ? 1
                      : (c >> 5) == 0x6  ? 2
                      : (c >> 4) == 0xE  ? 3
                      : (c >> 3) == 0x1E ? 4
                                         : 0;
    bool ok = len > 0 && i + len <= n;
    std::uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (std::size_t k = 1; ok && k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc >> 6) == 0x2;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (ok) {  // no overlong forms, surrogates or values past U+10FFFF
      ok = !(len == 2 && cp < 0x80) && !(len == 3 && cp < 0x800) && !(len == 4 && cp < 0x10000) &&
           !(cp >= 0xD800 && cp <= 0xDFFF) && cp <= 0x10FFFF;
    }
    ATTN_CHECK(ok, IOError, "{} line {}: invalid UTF-8 at byte {} of the line (0x{:02X})", what,
               line, i - line_start + 1, c);
    ATTN_CHECK(c != 0, IOError, "{} line {}: a NUL byte at byte {} of the line: not a text file",
               what, line, i - line_start + 1);
    i += len;
    if (c == '\n') {
      ++line;
      line_start = i;
    }
  }
}

namespace {

locale_t utf8_locale() {
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return loc;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::string to_lower_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  locale_t loc = utf8_locale();
  std::size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : static_cast<char>(c);
      ++i;
      continue;
    }
    std::size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    if (i + len > n) len = 1;
    std::uint32_t cp = len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : len == 4 ? (c & 0x07) : c;
    for (std::size_t k = 1; k < len; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    if (len == 1 || loc == static_cast<locale_t>(0)) {
      out.append(s.substr(i, len));
    } else {
      append_utf8(out, static_cast<std::uint32_t>(towlower_l(static_cast<wint_t>(cp), loc)));
    }
    i += len;
  }
  return out;
}

std::string preprocess_nmt(std::string_view text) {
  // U+202F is E2 80 AF and U+00A0 is C2 A0 in UTF-8.
  std::string spaced;
  spaced.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "\xE2\x80\xAF") == 0) {
      spaced += ' ';
      i += 2;
    } else if (text.compare(i, 2, "\xC2\xA0") == 0) {
      spaced += ' ';
      i += 1;
    } else {
      spaced += text[i];
    }
  }
  std::string lower = to_lower_utf8(spaced);
  std::string out;
  out.reserve(lower.size() + lower.size() / 8);
  for (std::size_t i = 0; i < lower.size(); ++i) {
    char c = lower[i];
    bool punct = c == ',' || c == '.' || c == '!' || c == '?';
    if (i > 0 && punct && lower[i - 1] != ' ') out += ' ';
    out += c;
  }
  return out;
}

std::vector<std::string> split_spaces(std::string_view line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t pos = line.find(' ', start);
    if (pos == std::string_view::npos) {
      out.emplace_back(line.substr(start));
      return out;
    }
    out.emplace_back(line.substr(start, pos - start));
    start = pos + 1;
  }
}

ParallelCorpus tokenize_nmt(std::string_view text, long num_examples, std::string_view what) {
  ParallelCorpus corpus;
  std::size_t start = 0;
  long i = 0;
  while (start <= text.size()) {
    if (num_examples > 0 && i > num_examples) break;
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ATTN_CHECK(line.size() <= kMaxLineBytes, IOError,
               "{} line {}: {} bytes long, more than the limit of {} bytes per line", what, i + 1,
               line.size(), kMaxLineBytes);
    if (!line.empty()) {
      std::size_t tab = line.find('\t');
      ATTN_CHECK(tab != std::string_view::npos, IOError,
                 "{} line {}: no tab between source and target: '{}'", what, i + 1,
                 printable_excerpt(line));
      std::size_t tab2 = line.find('\t', tab + 1);
      std::string_view src = line.substr(0, tab);
      std::string_view tgt =
          line.substr(tab + 1, tab2 == std::string_view::npos ? tab2 : tab2 - tab - 1);
      corpus.source.push_back(split_spaces(src));
      corpus.target.push_back(split_spaces(tgt));
    }
    ++i;
    if (end == text.size()) break;
    start = end + 1;
  }
  return corpus;
}

}  // namespace attn::data
