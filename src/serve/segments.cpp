// Sentences of a text and text nodes of HTML (src/serve/segments.h).
#include "serve/segments.h"

#include <gumbo.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <string_view>

#include "attn/core/error.h"

namespace attn::serve {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// The length of the sentence-ending mark at text[i] (. ! ? or an ellipsis,
// a CJK full stop, exclamation or question mark), else 0.
std::size_t end_mark(std::string_view text, std::size_t i) {
  const char c = text[i];
  if (c == '.' || c == '!' || c == '?') return 1;
  for (std::string_view mark : {"\u2026", "\u3002", "\uff01", "\uff1f"})
    if (text.substr(i, mark.size()) == mark) return mark.size();
  return 0;
}

// The length of a closing quote or bracket at text[i], else 0.
std::size_t closer(std::string_view text, std::size_t i) {
  const char c = text[i];
  if (c == ')' || c == ']' || c == '}' || c == '"' || c == '\'') return 1;
  for (std::string_view mark : {"\u00bb", "\u201d", "\u2019", "\u300d"})
    if (text.substr(i, mark.size()) == mark) return mark.size();
  return 0;
}

// Whether the '.' at text[dot] ends an abbreviation rather than a
// sentence: the word before it is a title or short form that is followed by
// more of its sentence ("Mr. Smith", "Mt. Fuji", "e.g. this", "M. Dupont"),
// or a capital initial ("J. Smith"; not "I", which ends "So am I.").
bool abbreviation(std::string_view text, std::size_t dot) {
  std::size_t start = dot;
  while (start > 0 && (std::isalpha(static_cast<unsigned char>(text[start - 1])) ||
                       (text[start - 1] == '.' && start - 1 != dot)))
    --start;
  const std::string_view word = text.substr(start, dot - start);
  if (word.size() == 1) return std::isupper(static_cast<unsigned char>(word[0])) && word[0] != 'I';
  static constexpr std::string_view kShortForms[] = {
      "Mr", "Mrs", "Ms",  "Dr",  "Prof", "St",     "Mt",  "Jr",  "Sr", "Lt",  "Col",  "Gen", "Capt",
      "vs", "etc", "e.g", "i.e", "cf",   "approx", "Inc", "Ltd", "Co", "Mme", "Mlle", "Mgr"};
  return std::find(std::begin(kShortForms), std::end(kShortForms), word) != std::end(kShortForms);
}

void add_piece(std::vector<Piece>& out, std::string_view text, bool translate) {
  if (text.empty()) return;
  if (!out.empty() && !out.back().translate && !translate) {
    out.back().text.append(text);  // neighbouring kept pieces are one
    return;
  }
  out.push_back({std::string(text), translate});
}

void append_sentences(std::vector<Piece>& out, std::string_view text) {
  std::size_t pos = 0;
  const std::size_t n = text.size();
  while (pos < n) {
    std::size_t start = pos;
    while (pos < n && is_space(text[pos])) ++pos;
    add_piece(out, text.substr(start, pos - start), false);
    start = pos;
    while (pos < n && text[pos] != '\n' && text[pos] != '\r') {
      const std::size_t mark = end_mark(text, pos);
      if (mark == 0) {
        ++pos;
        continue;
      }
      const bool single_dot =
          text[pos] == '.' && !(pos + 1 < n && end_mark(text, pos + 1)) && abbreviation(text, pos);
      pos += mark;
      for (std::size_t m; pos < n && ((m = end_mark(text, pos)) || (m = closer(text, pos)));)
        pos += m;
      if (single_dot) continue;
      if (pos == n || is_space(text[pos])) break;
    }
    std::size_t end = pos;
    while (end > start && is_space(text[end - 1])) --end;
    add_piece(out, text.substr(start, end - start), true);
    add_piece(out, text.substr(end, pos - end), false);
  }
}

// Elements whose text is never translated.
bool keeps_text(const GumboElement& e) {
  switch (e.tag) {
    case GUMBO_TAG_SCRIPT:
    case GUMBO_TAG_STYLE:
    case GUMBO_TAG_CODE:
    case GUMBO_TAG_PRE:
    case GUMBO_TAG_TEXTAREA:
    case GUMBO_TAG_TEMPLATE:
    case GUMBO_TAG_NOSCRIPT: return true;
    default: break;
  }
  const GumboAttribute* a = gumbo_get_attribute(&e.attributes, "translate");
  return a != nullptr && std::strcmp(a->value, "no") == 0;
}

struct TextNode {
  std::size_t offset, length;  // of its original text in the input
  std::string text;  // decoded
};

// The decoded text of markup-free HTML text (its character references
// read as a parser reads them; spaces around it kept as they are, which a
// document's parse would drop).
std::string decode_text(std::string_view html) {
  std::size_t first = 0, last = html.size();
  while (first < last && is_space(html[first])) ++first;
  while (last > first && is_space(html[last - 1])) --last;
  const std::string_view inner = html.substr(first, last - first);
  GumboOutput* parsed = gumbo_parse_with_options(&kGumboDefaultOptions, inner.data(), inner.size());
  std::string out(html.substr(0, first));
  std::vector<const GumboNode*> stack = {parsed->root};
  while (!stack.empty()) {
    const GumboNode* n = stack.back();
    stack.pop_back();
    if (n->type == GUMBO_NODE_TEXT || n->type == GUMBO_NODE_WHITESPACE) {
      out += n->v.text.text;
    } else if (n->type == GUMBO_NODE_ELEMENT) {
      const GumboVector& c = n->v.element.children;
      for (unsigned i = c.length; i-- > 0;)
        stack.push_back(static_cast<const GumboNode*>(c.data[i]));
    }
  }
  gumbo_destroy_output(&kGumboDefaultOptions, parsed);
  out.append(html.substr(last));
  return out;
}

// A text node's original text, [offset, offset + length) of the input. A
// tag the parser ignored (a stray end tag) can lie inside it: such a span
// is cut at its tags, which stay as written, and each part between them is
// a text node of its own.
void add_text_node(std::string_view input, std::size_t offset, std::size_t length,
                   const char* decoded, std::vector<TextNode>& out) {
  const std::string_view span = input.substr(offset, length);
  if (span.find('<') == std::string_view::npos) {
    out.push_back({offset, length, decoded});
    return;
  }
  std::size_t at = 0;
  while (at < span.size()) {
    const std::size_t tag = span.find('<', at);
    const std::size_t text_end = tag == std::string_view::npos ? span.size() : tag;
    if (text_end > at)
      out.push_back({offset + at, text_end - at, decode_text(span.substr(at, text_end - at))});
    if (tag == std::string_view::npos) break;
    const std::size_t close = span.find('>', tag);
    at = close == std::string_view::npos ? span.size() : close + 1;
  }
}

// The text nodes under `node` whose original text lies inside [base, end).
void collect_text(const GumboNode* node, const char* base, const char* end,
                  std::vector<TextNode>& out) {
  if (node->type == GUMBO_NODE_TEXT) {
    const GumboStringPiece& o = node->v.text.original_text;
    if (o.data != nullptr && o.length > 0 && o.data >= base && o.data + o.length <= end)
      add_text_node(std::string_view(base, static_cast<std::size_t>(end - base)),
                    static_cast<std::size_t>(o.data - base), o.length, node->v.text.text, out);
    return;
  }
  const GumboVector* children = nullptr;
  if (node->type == GUMBO_NODE_DOCUMENT) {
    children = &node->v.document.children;
  } else if (node->type == GUMBO_NODE_ELEMENT || node->type == GUMBO_NODE_TEMPLATE) {
    if (keeps_text(node->v.element)) return;
    children = &node->v.element.children;
  }
  if (children == nullptr) return;
  for (unsigned i = 0; i < children->length; ++i)
    collect_text(static_cast<const GumboNode*>(children->data[i]), base, end, out);
}

}  // namespace

std::vector<Piece> split_sentences(const std::string& text) {
  std::vector<Piece> out;
  append_sentences(out, text);
  return out;
}

std::vector<Piece> split_html(const std::string& html) {
  GumboOptions options = kGumboDefaultOptions;
  options.max_errors = 0;  // the parse goes on whatever it meets; no error list kept
  GumboOutput* parsed = gumbo_parse_with_options(&options, html.data(), html.size());
  ATTN_CHECK(parsed != nullptr, InternalError, "split_html: gumbo returned no parse tree");
  std::vector<TextNode> nodes;
  collect_text(parsed->document, html.data(), html.data() + html.size(), nodes);
  gumbo_destroy_output(&options, parsed);
  std::sort(nodes.begin(), nodes.end(),
            [](const TextNode& a, const TextNode& b) { return a.offset < b.offset; });
  std::vector<Piece> out;
  std::size_t at = 0;
  for (const TextNode& t : nodes) {
    if (t.offset < at) continue;  // overlapping spans: never seen, kept as written
    add_piece(out, std::string_view(html).substr(at, t.offset - at), false);
    // (What append_sentences keeps of a text node is spaces, which need no
    // escaping back.)
    append_sentences(out, t.text);
    at = t.offset + t.length;
  }
  add_piece(out, std::string_view(html).substr(at), false);
  return out;
}

std::string join_pieces(const std::vector<Piece>& pieces,
                        const std::vector<std::string>& translations, bool escape) {
  std::string out;
  std::size_t next = 0;
  for (const Piece& p : pieces) {
    if (!p.translate) {
      out += p.text;
      continue;
    }
    ATTN_CHECK(next < translations.size(), InternalError,
               "join_pieces: {} translations for more pieces", translations.size());
    out += escape ? escape_html_text(translations[next]) : translations[next];
    ++next;
  }
  ATTN_CHECK(next == translations.size(), InternalError,
             "join_pieces: {} translations for {} pieces", translations.size(), next);
  return out;
}

std::string escape_html_text(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace attn::serve
