// What of a request's text is translated (src/serve/segments.h): sentences
// and the spaces between them; HTML's text nodes, the markup kept byte for
// byte.
#include "serve/segments.h"

#include "testing.h"

using namespace attn::serve;

namespace {

std::vector<std::string> translated(const std::vector<Piece>& pieces) {
  std::vector<std::string> out;
  for (const Piece& p : pieces)
    if (p.translate) out.push_back(p.text);
  return out;
}

std::string rejoined(const std::vector<Piece>& pieces) {
  std::string out;
  for (const Piece& p : pieces) out += p.text;
  return out;
}

// Every translated piece replaced by "[its text]".
std::string bracketed(const std::vector<Piece>& pieces, bool html) {
  std::vector<std::string> t;
  for (const std::string& s : translated(pieces)) t.push_back("[" + s + "]");
  return join_pieces(pieces, t, html);
}

}  // namespace

TEST(Segments, SentencesAndTheSpacesBetweenThem) {
  const std::string text = "  Hello there.  How are you?\nI'm fine!! \"Really.\" Yes\u2026 ok";
  const auto pieces = split_sentences(text);
  EXPECT_EQ(rejoined(pieces), text);
  EXPECT_EQ(translated(pieces),
            (std::vector<std::string>{"Hello there.", "How are you?", "I'm fine!!", "\"Really.\"",
                                      "Yes\u2026", "ok"}));
  EXPECT_EQ(bracketed(pieces, false),
            "  [Hello there.]  [How are you?]\n[I'm fine!!] [\"Really.\"] [Yes\u2026] [ok]");
  // A mark inside a word does not end a sentence; a line end always does.
  EXPECT_EQ(translated(split_sentences("3.14 is pi.\r\nNo mark here\n\nEnd")),
            (std::vector<std::string>{"3.14 is pi.", "No mark here", "End"}));
  EXPECT_TRUE(translated(split_sentences(" \n\t ")).empty());
  EXPECT_TRUE(split_sentences("").empty());
}

// A '.' after a title, a short form or a capital initial does not end the
// sentence; after "I", a number or another word it does.
TEST(Segments, AbbreviationsAndInitialsStayInTheirSentence) {
  EXPECT_EQ(translated(split_sentences("The top of Mt. Fuji is covered with snow.")),
            (std::vector<std::string>{"The top of Mt. Fuji is covered with snow."}));
  EXPECT_EQ(translated(split_sentences("Mr. and Mrs. Smith met J. Doe, e.g. at work. Then?")),
            (std::vector<std::string>{"Mr. and Mrs. Smith met J. Doe, e.g. at work.", "Then?"}));
  EXPECT_EQ(translated(split_sentences("M. Dupont est parti. Mme. Martin reste.")),
            (std::vector<std::string>{"M. Dupont est parti.", "Mme. Martin reste."}));
  EXPECT_EQ(translated(split_sentences("So am I. Let's go. It costs 5. Ask Tom. No.")),
            (std::vector<std::string>{"So am I.", "Let's go.", "It costs 5.", "Ask Tom.", "No."}));
  // An ellipsis after a short form still ends the sentence.
  EXPECT_EQ(translated(split_sentences("Wait for Dr... Go!")),
            (std::vector<std::string>{"Wait for Dr...", "Go!"}));
}

TEST(Segments, HtmlTextNodesOnlyTheMarkupAsWritten) {
  const std::string html =
      "<p class=\"x\">I am <b>home.</b> Tom &amp; Jerry.</p><!-- a comment. -->"
      "<script>var s = \"Not this.\";</script><pre>Nor this.</pre>"
      "<span translate=\"no\">Keep.</span><div title=\"Stay.\">Go";
  const auto pieces = split_html(html);
  EXPECT_EQ(translated(pieces), (std::vector<std::string>{"I am", "home.", "Tom & Jerry.", "Go"}));
  EXPECT_EQ(bracketed(pieces, true),
            "<p class=\"x\">[I am] <b>[home.]</b> [Tom &amp; Jerry.]</p><!-- a comment. -->"
            "<script>var s = \"Not this.\";</script><pre>Nor this.</pre>"
            "<span translate=\"no\">Keep.</span><div title=\"Stay.\">[Go]");
  // Unchanged translations give the text back (entities as written here).
  std::vector<std::string> same = translated(pieces);
  EXPECT_EQ(join_pieces(pieces, same, true), html);
}

TEST(Segments, BrokenHtmlIsReadAsBrowsersReadIt) {
  // Unclosed tags, a stray end tag (which the parser ignores inside a text
  // node's span), a '<' at the end: no error, every byte of markup kept.
  const std::string html =
      "<p>One.<b>Two.</i> Two &amp; a half.<div>Three <img src=\"a.png\">"
      "four.<p>Five<";
  const auto pieces = split_html(html);
  EXPECT_EQ(translated(pieces),
            (std::vector<std::string>{"One.", "Two.", "Two & a half.", "Three", "four.", "Five"}));
  EXPECT_EQ(join_pieces(pieces, translated(pieces), true), html);
  EXPECT_EQ(bracketed(pieces, true),
            "<p>[One.]<b>[Two.]</i> [Two &amp; a half.]<div>[Three] <img src=\"a.png\">"
            "[four.]<p>[Five]<");
  // A translation that holds markup stays text.
  const auto one = split_html("<i>x</i>");
  EXPECT_EQ(join_pieces(one, {"<script>alert(1)</script>"}, true),
            "<i>&lt;script&gt;alert(1)&lt;/script&gt;</i>");
  EXPECT_TRUE(translated(split_html("<br><hr/>")).empty());
}

TEST(Segments, JoinChecksItsCounts) {
  const auto pieces = split_sentences("Go. Run.");
  EXPECT_THROW(join_pieces(pieces, {"a"}, false), attn::InternalError);
  EXPECT_THROW(join_pieces(pieces, {"a", "b", "c"}, false), attn::InternalError);
  EXPECT_EQ(escape_html_text("a<b>&c\"'"), "a&lt;b&gt;&amp;c\"'");
}
