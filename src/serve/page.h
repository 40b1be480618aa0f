// src/serve/page.h — internal: the web page at GET /.
//
// One self-contained page (its style and script inline; nothing fetched
// from anywhere but this server, which it calls as any client does: GET
// languages and frontend/settings, POST translate and attention). A text
// box, the language pair with a swap button, the translation as one types
// (debounced), the beam's alternatives, and "Show attention": the page POSTs
// /attention, whose answer is the attention viewer of `attn attention
// --html` (viz::attention_viewer_html, one drawing code path), shown in a
// sandboxed frame. Native controls only, so every one is reachable by
// keyboard (Ctrl+Enter translates at once); one column at a phone's width.
//
// For tests: #translation carries data-state (idle, busy, done, error),
// data-text (the last translation) and data-source (the text it
// translates); #attention-frame gets the viewer.
#pragma once

#include <string>

namespace attn::serve {

const std::string& page_html();

}  // namespace attn::serve
