// src/viz/html_page.h — internal: the opening every page attn writes shares
// (the attention viewer, the translator's web page): an HTML5 document in
// UTF-8, a viewport for phones, the title, and the style sheet's first rule.
// Each page's own style, markup and script follow it.
#pragma once

#include <string>
#include <string_view>

namespace attn::viz::detail {

// The page up to and inside its <style> element; `rest` goes on from there
// (the page's own rules, then </style>, the body and </html>).
inline std::string html_page(std::string_view title, std::string_view rest) {
  std::string page =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>";
  page += title;
  page += "</title>\n<style>\n* { box-sizing: border-box; }\n";
  page += rest;
  return page;
}

}  // namespace attn::viz::detail
