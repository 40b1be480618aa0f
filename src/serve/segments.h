// src/serve/segments.h — internal: what of a request's text is translated.
//
// A text is cut into pieces, each either kept as it is (spaces, line ends,
// markup) or translated (a sentence): the models are trained on single
// sentences, so a paragraph is translated sentence by sentence and put back
// together with its own spaces and line ends.
//
// Sentences (split_sentences): a line end always ends one; so does one of
// . ! ? … (and runs of them, with closing quotes or brackets after them)
// followed by a space, but for a single '.' after a common title or short
// form ("Mr. Smith", "Mt. Fuji", "e.g.", "Mme.") or a capital initial other
// than I ("J. Smith"). What it cuts is translated piece by piece.
//
// HTML (split_html, LibreTranslate's format "html"): the text is parsed by
// gumbo (Debian's libgumbo, an HTML5 parser: unclosed tags and stray
// markup are read as browsers read them) and only its text nodes are
// translated, in place: every byte outside them (tags, attributes,
// comments, entities of other nodes) stays as written. Text inside script,
// style, code, pre, textarea and template elements, and inside an element
// with translate="no", is kept. A text node's entities are decoded before it
// is translated, and the translation is written back escaped (& < >).
#pragma once

#include <string>
#include <vector>

namespace attn::serve {

struct Piece {
  std::string text;  // as written (kept), or the plain text to translate
  bool translate = false;
};

// `text` as sentences to translate and the spaces between them; the pieces'
// texts concatenated give `text` back.
std::vector<Piece> split_sentences(const std::string& text);

// `html`'s text nodes cut into sentences (as above), the markup between them
// kept as written. The translated pieces hold decoded text ("Tom & Jerry"
// for "Tom &amp; Jerry"): joined with escape = true and every translation
// the text itself, they give `html` back but for how the text nodes'
// character references are written.
std::vector<Piece> split_html(const std::string& html);

// The pieces put back together, translated ones replaced by
// `translations[i]` (one per piece with translate = true, in order);
// `escape` writes them as HTML text (& < > escaped).
std::string join_pieces(const std::vector<Piece>& pieces,
                        const std::vector<std::string>& translations, bool escape);

// & < > as entities: text that stays text inside HTML.
std::string escape_html_text(const std::string& text);

}  // namespace attn::serve
