// attn/viz/attention_viewer.h — one self-contained HTML page to explore the
// attention weights of one translation.
//
//   std::string page = viz::attention_viewer_html(seq2seq::attention_maps_json(maps, src, text),
//                                                 {.layer = 2, .head = 3, .kind =
//                                                 "decoder_cross"});
//   io::write_file_atomic("out/home.html", page);
//
// The page needs no network: its script and style are inline, it uses the
// system's fonts, and the weights are embedded as the JSON given (in a
// <script type="application/json" id="attn-data"> element, '<' written as
// \u003c so that no token can end the element). In the page the reader picks
// the kind (encoder self-, decoder self-, decoder cross-attention; a kind
// whose list is empty is not offered), the layer and the head, or all heads
// (their mean). Hovering a query token (or a heatmap row) shows its weights
// as lines between the query and key tokens, opacity and width proportional
// to the weight, and highlights its row of the query x key heatmap (Reds,
// 0 to 1, as the pictures of `attn attention`); a click keeps it.
//
// The initial view is `view`, unless the URL's fragment names one:
// file:///.../home.html#layer=2&head=3&kind=cross&query=4 (layer, head and
// query 1-based; head=all for the mean; kind = encoder, self or cross, or the
// JSON's names). The page keeps the fragment up to date as the reader
// chooses. The caption and the document's title name the view shown
// ("Layer 2 · Head 3 · Decoder cross-attention"), and an element
// <output id="check"> carries data-kind, data-layer, data-head, data-query,
// data-total-sum (every weight of the file summed in document order, as a
// JavaScript number) and data-view-sum (the matrix shown), for tests; each
// heatmap cell carries its weight in data-w.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace attn::viz {

struct AttentionViewerView {
  std::int64_t layer = 1;  // 1-based
  std::int64_t head = 0;  // 1-based; 0: all heads (their mean)
  std::string kind = "decoder_cross";  // "encoder", "decoder_self" or "decoder_cross"
};

// The page for `data_json`, a JSON object as seq2seq::attention_maps_json
// writes it ("source", "translation", "source_tokens", "target_tokens",
// "attention": {"encoder", "decoder_self", "decoder_cross"}, each
// [layer][head][query][key]). ValueError if it is not such an object or the
// view names an unknown kind; a layer or head that the data lacks falls back
// to the first layer and all heads in the page.
std::string attention_viewer_html(std::string_view data_json, const AttentionViewerView& view = {});

}  // namespace attn::viz
