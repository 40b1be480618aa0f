#include "attn/viz/attention_viewer.h"

#include <nlohmann/json.hpp>

#include "attention_viewer_page.h"
#include "attn/core/error.h"
#include "html_page.h"

namespace attn::viz {

namespace {

// JSON text made safe inside a <script> element: '<' only occurs inside
// strings (JSON has no other use for it), where \u003c reads back as '<';
// so no token can close the element or open a comment.
std::string script_safe(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

void replace_once(std::string& page, std::string_view marker, const std::string& with) {
  const std::size_t at = page.find(marker);
  ATTN_CHECK(at != std::string::npos && page.find(marker, at + 1) == std::string::npos,
             InternalError, "attention_viewer_html: the page must hold {} exactly once", marker);
  page.replace(at, marker.size(), with);
}

}  // namespace

std::string attention_viewer_html(std::string_view data_json, const AttentionViewerView& view) {
  ATTN_CHECK(view.kind == "encoder" || view.kind == "decoder_self" || view.kind == "decoder_cross",
             ValueError,
             "attention_viewer_html: kind must be encoder, decoder_self or decoder_cross, got '{}'",
             view.kind);
  nlohmann::json data = nlohmann::json::parse(data_json, nullptr, /*allow_exceptions=*/false);
  ATTN_CHECK(data.is_object() && data.contains("attention") && data["attention"].is_object(),
             ValueError,
             "attention_viewer_html: expected a JSON object with an \"attention\" object (as "
             "attention_maps_json writes it)");
  for (const char* kind : {"encoder", "decoder_self", "decoder_cross"})
    ATTN_CHECK(!data["attention"].contains(kind) || data["attention"][kind].is_array(), ValueError,
               "attention_viewer_html: \"attention\".\"{}\" must be a list of layers", kind);
  nlohmann::json initial = {{"layer", view.layer}, {"kind", view.kind}};
  if (view.head > 0)
    initial["head"] = view.head;
  else
    initial["head"] = "all";
  std::string page = detail::html_page("Attention viewer", detail::kAttentionViewerPage);
  replace_once(page, "ATTN_VIEW_JSON", script_safe(initial.dump()));
  // Last: the data may hold the other marker's text in a token.
  replace_once(page, "ATTN_DATA_JSON", script_safe(data_json));
  return page;
}

}  // namespace attn::viz
