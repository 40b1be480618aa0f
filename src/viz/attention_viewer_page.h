// The attention viewer's page (attn/viz/attention_viewer.h): HTML, style and
// script in one template. attention_viewer_html() replaces the two markers
// ATTN_DATA_JSON and ATTN_VIEW_JSON (each once, inside its JSON script
// element) with the weights and the initial view. No network: no external
// script, style sheet, font or image.
#pragma once

namespace attn::viz::detail {

// The page after html_page()'s opening (viz/html_page.h).
inline constexpr const char* kAttentionViewerPage =
    R"page(:root { --ink: #1d2330; --muted: #5d6677; --line: #1f5fb4; --hi: #1f5fb4; --card: #fff; }
body { margin: 0; padding: 20px 28px 28px; background: #f3f4f7; color: var(--ink);
  font: 15px/1.4 system-ui, "Segoe UI", "DejaVu Sans", "Liberation Sans", sans-serif; }
h1 { font-size: 21px; margin: 0 0 2px; font-weight: 600; }
h1 .arrow { color: var(--muted); margin: 0 8px; }
#caption { font-size: 17px; margin: 4px 0 14px; color: var(--hi); font-weight: 600; }
.controls { display: flex; flex-wrap: wrap; gap: 10px 26px; margin-bottom: 16px; }
.group { display: flex; align-items: center; gap: 6px; flex-wrap: wrap; }
.group > span { color: var(--muted); font-size: 13px; text-transform: uppercase;
  letter-spacing: .05em; margin-right: 2px; }
button { font: inherit; font-size: 14px; padding: 4px 11px; border: 1px solid #c5cad4;
  background: #fff; color: var(--ink); border-radius: 6px; cursor: pointer; }
button:hover { border-color: var(--hi); }
button.on { background: var(--hi); border-color: var(--hi); color: #fff; }
main { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
.panel { background: var(--card); border-radius: 10px; padding: 12px 16px 14px;
  box-shadow: 0 1px 3px rgba(20, 30, 60, .12); max-width: 100%; overflow-x: auto; }
.panel h2 { font-size: 14px; margin: 0 0 6px; color: var(--muted); font-weight: 600; }
svg text { font-family: system-ui, "Segoe UI", "DejaVu Sans", "Liberation Sans", sans-serif; }
.tok rect { fill: #eef1f6; stroke: #c9cfda; }
.tok text { font-size: 15px; fill: var(--ink); }
.tok.q { cursor: pointer; }
.tok.focus rect { fill: var(--hi); stroke: var(--hi); }
.tok.focus text { fill: #fff; font-weight: 600; }
.rowlabel { font-size: 12px; fill: var(--muted); text-transform: uppercase; letter-spacing: .05em; }
.wlabel { font-size: 12px; fill: var(--muted); }
.axis { font-size: 13px; fill: var(--muted); }
.tick { font-size: 14px; fill: var(--ink); }
.tick.focus { fill: var(--hi); font-weight: 700; }
.cbtick { font-size: 12px; fill: var(--ink); }
#info { min-height: 1.4em; margin-top: 6px; color: var(--muted); font-size: 14px; }
footer { margin-top: 14px; font-size: 12.5px; color: var(--muted); }
</style>
</head>
<body>
<h1 id="sentence"></h1>
<div id="caption"></div>
<div class="controls">
  <div class="group" id="kinds"><span>Attention</span></div>
  <div class="group" id="layers"><span>Layer</span></div>
  <div class="group" id="heads"><span>Head</span></div>
</div>
<main>
  <section class="panel"><h2 id="lines-title"></h2><svg id="lines"></svg></section>
  <section class="panel"><h2>Weights: queries &times; keys</h2><svg id="heatmap"></svg>
    <div id="info"></div></section>
</main>
<footer id="footer"></footer>
<output id="check" hidden></output>
<script type="application/json" id="attn-data">ATTN_DATA_JSON</script>
<script type="application/json" id="attn-view">ATTN_VIEW_JSON</script>
<script>
"use strict";
const DATA = JSON.parse(document.getElementById("attn-data").textContent);
const VIEW = JSON.parse(document.getElementById("attn-view").textContent);
const NS = "http://www.w3.org/2000/svg";
const FONT = '15px system-ui, "Segoe UI", "DejaVu Sans", "Liberation Sans", sans-serif';
const KINDS = [
  {key: "encoder", hash: "encoder", name: "Encoder self-attention", button: "Encoder self",
   q: "source", k: "source"},
  {key: "decoder_self", hash: "self", name: "Decoder self-attention", button: "Decoder self",
   q: "target", k: "target"},
  {key: "decoder_cross", hash: "cross", name: "Decoder cross-attention", button: "Cross (decoder \u2192 encoder)",
   q: "target", k: "source"},
];
const ALIASES = {encoder: "encoder", enc: "encoder", encoder_self: "encoder",
  self: "decoder_self", decoder_self: "decoder_self", dec_self: "decoder_self",
  cross: "decoder_cross", decoder_cross: "decoder_cross", enc_dec: "decoder_cross"};
const TOKENS = {source: DATA.source_tokens || [], target: DATA.target_tokens || []};
const ROLE = {source: "source", target: "decoder input"};
const PRESENT = KINDS.filter(k => Array.isArray(DATA.attention[k.key]) && DATA.attention[k.key].length > 0);
const HINT = "Hover a cell for its weight, a row to follow its query.";
const state = {kind: null, layer: 0, head: -1, query: -1, pinned: -1};

// Reds (matplotlib's ColorBrewer anchors), as the pictures of `attn attention`.
const REDS = [0xfff5f0, 0xfee0d2, 0xfcbba1, 0xfc9272, 0xfb6a4a, 0xef3b2c, 0xcb181d, 0xa50f15, 0x67000d];
function reds(t) {
  t = Math.min(1, Math.max(0, t)) * (REDS.length - 1);
  const i = Math.min(REDS.length - 2, Math.floor(t)), f = t - i;
  const c = s => Math.round(((REDS[i] >> s) & 255) * (1 - f) + ((REDS[i + 1] >> s) & 255) * f);
  return `rgb(${c(16)},${c(8)},${c(0)})`;
}
const ctx2d = document.createElement("canvas").getContext("2d");
function textWidth(s, font) { ctx2d.font = font || FONT; return ctx2d.measureText(s).width; }
function el(name, attrs, parent, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function shown(t) { return t === "" ? "\u2423" : t; }

// The matrix shown: one head, or the mean of the heads (summed in head order).
function layers() { return DATA.attention[state.kind.key]; }
function matrix() {
  const L = layers()[state.layer];
  if (state.head >= 0) return L[state.head];
  const Q = L[0].length, K = Q ? L[0][0].length : 0;
  const m = [];
  for (let q = 0; q < Q; ++q) {
    const row = [];
    for (let k = 0; k < K; ++k) {
      let s = 0;
      for (let h = 0; h < L.length; ++h) s += L[h][q][k];
      row.push(s / L.length);
    }
    m.push(row);
  }
  return m;
}

function parseView(text) {
  const v = {};
  for (const part of text.replace(/^#/, "").split("&")) {
    const i = part.indexOf("=");
    if (i > 0) v[decodeURIComponent(part.slice(0, i)).toLowerCase()] = decodeURIComponent(part.slice(i + 1));
  }
  return v;
}
function applyView(v) {
  const want = ALIASES[String(v.kind || "").toLowerCase().replace(/-/g, "_")];
  state.kind = PRESENT.find(k => k.key === want) || PRESENT.find(k => k.key === "decoder_cross") || PRESENT[0];
  const nl = layers().length, layer = parseInt(v.layer, 10);
  state.layer = layer >= 1 && layer <= nl ? layer - 1 : 0;
  const nh = layers()[state.layer].length, head = parseInt(v.head, 10);
  state.head = head >= 1 && head <= nh ? head - 1 : -1;
  const nq = TOKENS[state.kind.q].length, query = parseInt(v.query, 10);
  state.pinned = state.query = query >= 1 && query <= nq ? query - 1 : -1;
}
function viewText() {
  let s = `layer=${state.layer + 1}&head=${state.head < 0 ? "all" : state.head + 1}&kind=${state.kind.hash}`;
  if (state.pinned >= 0) s += `&query=${state.pinned + 1}`;
  return s;
}

function buttons(id, items, isOn, choose) {
  const g = document.getElementById(id);
  while (g.children.length > 1) g.removeChild(g.lastChild);
  items.forEach((label, i) => {
    const b = document.createElement("button");
    b.textContent = label;
    if (isOn(i)) b.className = "on";
    b.onclick = () => { choose(i); render(true); };
    g.appendChild(b);
  });
}
function renderControls() {
  buttons("kinds", PRESENT.map(k => k.button), i => PRESENT[i] === state.kind, i => {
    state.kind = PRESENT[i];
    state.layer = Math.min(state.layer, layers().length - 1);
    if (state.head >= layers()[state.layer].length) state.head = -1;
    state.query = state.pinned = -1;
  });
  buttons("layers", layers().map((_, i) => String(i + 1)), i => i === state.layer, i => {
    state.layer = i;
    if (state.head >= layers()[i].length) state.head = -1;
  });
  const heads = ["All (mean)"].concat(layers()[state.layer].map((_, i) => String(i + 1)));
  buttons("heads", heads, i => i === state.head + 1, i => { state.head = i - 1; });
}

// Lines between the query row (top) and the key row (bottom).
// A long sentence is set in a smaller font (down to 10 px) to fit the window.
function rowLayout(toks, px) {
  const font = `${px}px system-ui, "Segoe UI", "DejaVu Sans", "Liberation Sans", sans-serif`;
  const w = toks.map(t => Math.max(px * 1.9, textWidth(shown(t), font) + px));
  const x = [];
  let at = 0;
  for (const wi of w) { x.push(at + wi / 2); at += wi + px * 0.4; }
  return {w, x, width: Math.max(0, at - px * 0.4), px};
}
function fittedRows(qt, kt, room) {
  let px = 15, rq, rk;
  for (;;) {
    rq = rowLayout(qt, px);
    rk = rowLayout(kt, px);
    if (px <= 10 || Math.max(rq.width, rk.width) <= room) return [rq, rk];
    px -= 1;
  }
}
function renderLines(m, height) {
  const svg = document.getElementById("lines");
  svg.textContent = "";
  const qt = TOKENS[state.kind.q], kt = TOKENS[state.kind.k];
  const Q = qt.length, K = kt.length;
  const left = 78;
  const [rq, rk] = fittedRows(qt, kt, Math.max(300, window.innerWidth - 56 - 32 - left - 12));
  const th = Math.round(rq.px * 2), fs = `font-size:${rq.px}px`;
  const inner = Math.max(rq.width, rk.width, 300);
  const W = left + inner + 12, H = Math.max(246, Math.min(height, 340)), yq = 16, yk = H - 60;
  const oq = left + (inner - rq.width) / 2, ok = left + (inner - rk.width) / 2;
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  el("text", {x: 0, y: yq + th / 2 + 4, class: "rowlabel"}, svg, "Queries");
  el("text", {x: 0, y: yk + th / 2 + 4, class: "rowlabel"}, svg, "Keys");
  const lines = el("g", {}, svg);
  const focus = state.query;
  for (let q = 0; q < Q; ++q) {
    if (focus >= 0 && q !== focus) continue;
    for (let k = 0; k < K; ++k) {
      const w = m[q][k];
      if (!(w > 0.004)) continue;
      el("line", {x1: oq + rq.x[q], y1: yq + th, x2: ok + rk.x[k], y2: yk,
        stroke: "#1f5fb4", "stroke-linecap": "round",
        "stroke-opacity": (focus >= 0 ? w : 0.55 * w).toFixed(4),
        "stroke-width": (1 + 6 * w).toFixed(3)}, lines);
    }
  }
  const row = (toks, lay, o, y, isQuery) => toks.forEach((t, i) => {
    const g = el("g", {class: "tok" + (isQuery ? " q" : "") + (isQuery && i === focus ? " focus" : "")}, svg);
    el("rect", {x: o + lay.x[i] - lay.w[i] / 2, y, width: lay.w[i], height: th, rx: 6}, g);
    el("text", {x: o + lay.x[i], y: y + th / 2 + lay.px * 0.35, "text-anchor": "middle", style: fs}, g, shown(t));
    if (isQuery) {
      g.addEventListener("mouseenter", () => setQuery(i));
      g.addEventListener("mouseleave", () => setQuery(state.pinned));
      g.addEventListener("click", () => { state.pinned = state.pinned === i ? -1 : i; setQuery(i, true); });
    } else if (focus >= 0) {
      const small = lay.px < 13, text = m[focus][i].toFixed(2);
      el("text", {x: o + lay.x[i], y: y + th + 17, "text-anchor": "middle", class: "wlabel",
        style: `font-size:${Math.min(12, lay.px * 0.85)}px`}, svg, small ? text.replace(/^0/, "") : text);
    }
  });
  row(qt, rq, oq, yq, true);
  row(kt, rk, ok, yk, false);
}

// The query x key matrix, the focused query's row outlined, a colorbar 0 to 1.
function renderHeatmap(m) {
  const svg = document.getElementById("heatmap");
  svg.textContent = "";
  const qt = TOKENS[state.kind.q], kt = TOKENS[state.kind.k];
  const Q = qt.length, K = kt.length;
  const cell = Math.max(14, Math.min(44, Math.floor(360 / Math.max(Q, K, 1))));
  const tickPx = cell < 20 ? 11 : 14, ts = `font-size:${tickPx}px`;
  const tickFont = `${tickPx}px system-ui, "Segoe UI", "DejaVu Sans", "Liberation Sans", sans-serif`;
  const qw = Math.max(0, ...qt.map(t => textWidth(shown(t), tickFont)));
  const kw = Math.max(0, ...kt.map(t => textWidth(shown(t), tickFont)));
  const slanted = kw > cell - 4;
  const x0 = qw + 10, y0 = 26, gw = K * cell, gh = Q * cell;
  const below = slanted ? kw * 0.71 + 16 : 22;
  const cbh = Math.max(gh, 120);
  const W = x0 + gw + 72, H = y0 + Math.max(gh + below + 24, cbh + 12);
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  const cells = el("g", {}, svg);
  const info = document.getElementById("info");
  info.textContent = HINT;
  for (let q = 0; q < Q; ++q) {
    const row = el("g", {}, cells);
    row.addEventListener("mouseenter", () => setQuery(q));
    row.addEventListener("click", () => { state.pinned = state.pinned === q ? -1 : q; setQuery(q, true); });
    for (let k = 0; k < K; ++k) {
      const w = m[q][k];
      const r = el("rect", {x: x0 + k * cell, y: y0 + q * cell, width: cell, height: cell,
        fill: reds(w), "data-w": String(w)}, row);
      r.addEventListener("mouseenter", () => {
        info.textContent = `query \u201c${shown(qt[q])}\u201d (${q + 1}) \u2192 key \u201c${shown(kt[k])}\u201d (${k + 1}): ${w.toFixed(4)}`;
      });
      if (cell >= 34)
        el("text", {x: x0 + (k + 0.5) * cell, y: y0 + (q + 0.5) * cell + 4, "text-anchor": "middle",
          "font-size": 11, fill: w > 0.55 ? "#fff" : "#4a1010", "pointer-events": "none"}, row, w.toFixed(2));
    }
  }
  el("rect", {x: x0, y: y0, width: gw, height: gh, fill: "none", stroke: "#9aa1ad"}, svg);
  if (state.query >= 0)
    el("rect", {x: x0 - 1.5, y: y0 + state.query * cell - 1.5, width: gw + 3, height: cell + 3,
      fill: "none", stroke: "#1f5fb4", "stroke-width": 3, rx: 2}, svg);
  qt.forEach((t, q) => el("text", {x: x0 - 7, y: y0 + (q + 0.5) * cell + tickPx * 0.35, "text-anchor": "end",
    class: "tick" + (q === state.query ? " focus" : ""), style: ts}, svg, shown(t)));
  kt.forEach((t, k) => {
    const x = x0 + (k + 0.5) * cell, y = y0 + gh + 17;
    el("text", slanted ? {x, y, "text-anchor": "end", class: "tick", style: ts, transform: `rotate(-45 ${x} ${y - 5})`}
                       : {x, y, "text-anchor": "middle", class: "tick", style: ts}, svg, shown(t));
  });
  el("text", {x: x0 + gw / 2, y: y0 + gh + below + 14, "text-anchor": "middle", class: "axis"}, svg,
     `Keys (${ROLE[state.kind.k]})`);
  el("text", {x: 0, y: 14, class: "axis"}, svg, `Queries (${ROLE[state.kind.q]}) \u2193`);
  // Colorbar.
  const cx = x0 + gw + 22, grad = el("linearGradient", {id: "cb", x1: 0, y1: 1, x2: 0, y2: 0}, el("defs", {}, svg));
  for (let i = 0; i <= 16; ++i) el("stop", {offset: i / 16, "stop-color": reds(i / 16)}, grad);
  el("rect", {x: cx, y: y0, width: 14, height: cbh, fill: "url(#cb)", stroke: "#9aa1ad"}, svg);
  for (const t of [0, 0.25, 0.5, 0.75, 1]) {
    const y = y0 + cbh * (1 - t);
    el("line", {x1: cx + 14, x2: cx + 18, y1: y, y2: y, stroke: "#555"}, svg);
    el("text", {x: cx + 21, y: y + 4, class: "cbtick"}, svg, String(t));
  }
}

function setQuery(q, keep) {
  if (!keep && state.query === q) return;
  state.query = q;
  render(keep);
}
function render(updateHash) {
  const headName = state.head < 0 ? "All heads (mean)" : `Head ${state.head + 1}`;
  const caption = `Layer ${state.layer + 1} \u00b7 ${headName} \u00b7 ${state.kind.name}`;
  document.getElementById("caption").textContent = caption;
  document.title = `${caption} \u2014 attention viewer`;
  const qt = TOKENS[state.kind.q];
  document.getElementById("lines-title").textContent = state.query >= 0
    ? `Query \u201c${shown(qt[state.query])}\u201d: its weights over the keys` + (state.pinned >= 0 ? " (click it to let go)" : "")
    : "Every query's weights \u2014 hover a query token (click to keep it)";
  renderControls();
  const m = matrix();
  renderHeatmap(m);
  renderLines(m, Number(document.getElementById("heatmap").getAttribute("height")));
  let viewSum = 0;
  for (const row of m) for (const w of row) viewSum += w;
  const check = document.getElementById("check");
  check.dataset.kind = state.kind.key;
  check.dataset.layer = state.layer + 1;
  check.dataset.head = state.head < 0 ? "all" : state.head + 1;
  check.dataset.query = state.query + 1;
  check.dataset.viewSum = String(viewSum);
  if (updateHash) {
    const h = "#" + viewText();
    try { history.replaceState(null, "", h); } catch (e) { /* a browser that refuses: keep the old fragment */ }
  }
}

function main() {
  const s = document.getElementById("sentence");
  s.append(DATA.source || "", Object.assign(document.createElement("span"), {className: "arrow", textContent: "\u2192"}),
           DATA.translation || "");
  let total = 0;
  for (const k of KINDS)
    for (const L of DATA.attention[k.key] || []) for (const H of L) for (const row of H) for (const w of row) total += w;
  document.getElementById("check").dataset.totalSum = String(total);
  const heads = PRESENT.length ? layers0().length : 0;
  document.getElementById("footer").textContent = PRESENT.length
    ? `${PRESENT.map(k => `${k.name.toLowerCase()}: ${DATA.attention[k.key].length} layers`).join(", ")}; ${heads} heads. ` +
      "Every weight is stored in this page; it needs no network. Written by attn attention --html."
    : "";
  if (!PRESENT.length) {
    document.getElementById("caption").textContent = "This file holds no attention weights.";
    document.querySelector("main").hidden = true;
    return;
  }
  const fromHash = parseView(location.hash);
  applyView(Object.assign({}, VIEW, fromHash));
  render(false);
  document.getElementById("heatmap").addEventListener("mouseleave", () => {
    document.getElementById("info").textContent = HINT;
    setQuery(state.pinned);
  });
  window.addEventListener("hashchange", () => {
    if (location.hash === "#" + viewText()) return;
    applyView(Object.assign({}, VIEW, parseView(location.hash)));
    render(false);
  });
}
function layers0() { return DATA.attention[PRESENT[0].key][0]; }
main();
</script>
</body>
</html>
)page";

}  // namespace attn::viz::detail
