// The web page (src/serve/page.h).
#include "serve/page.h"

#include "viz/html_page.h"

namespace attn::serve {

namespace {

// The page after html_page()'s opening (viz/html_page.h).
constexpr const char* kPage =
    R"page(:root { --ink: #1d2330; --muted: #5d6677; --hi: #1f5fb4; --card: #fff; --line: #c5cad4; }
body { margin: 0; padding: 20px 24px 32px; background: #f3f4f7; color: var(--ink);
  font: 16px/1.45 system-ui, "Segoe UI", "DejaVu Sans", "Liberation Sans", sans-serif; }
h1 { font-size: 22px; margin: 0 0 14px; font-weight: 600; }
h1 small { color: var(--muted); font-weight: 400; font-size: 15px; margin-left: 8px; }
.bar { display: flex; flex-wrap: wrap; align-items: center; gap: 8px; margin-bottom: 12px; }
label { color: var(--muted); font-size: 14px; }
select, button, input, textarea { font: inherit; color: var(--ink); }
select, input { padding: 6px 8px; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
button { padding: 6px 14px; border: 1px solid var(--line); border-radius: 6px; background: #fff;
  cursor: pointer; }
button:hover:not(:disabled) { border-color: var(--hi); }
button:disabled { color: #9aa1ad; cursor: default; }
button.primary { background: var(--hi); border-color: var(--hi); color: #fff; }
:focus-visible { outline: 3px solid #7aa7e8; outline-offset: 1px; }
main { display: flex; gap: 16px; align-items: stretch; }
.panel { flex: 1 1 0; min-width: 0; background: var(--card); border-radius: 10px;
  padding: 12px 14px; box-shadow: 0 1px 3px rgba(20, 30, 60, .12); }
textarea { width: 100%; min-height: 180px; border: 0; resize: vertical; padding: 0;
  font-size: 18px; background: transparent; }
textarea:focus-visible { outline: none; }
#translation { min-height: 180px; font-size: 18px; white-space: pre-wrap; overflow-wrap: anywhere; }
#translation[data-state=busy] { color: var(--muted); }
#status { min-height: 1.4em; color: var(--muted); font-size: 14px; margin-top: 8px; }
#status.error { color: #b42318; }
#alternatives { margin: 10px 0 0; padding-left: 20px; color: var(--muted); }
#alternatives:empty { display: none; }
#alternatives li { color: var(--ink); padding: 1px 0; }
#attention { margin-top: 16px; }
#attention-frame { width: 100%; height: 640px; border: 0; border-radius: 10px; background: #fff;
  box-shadow: 0 1px 3px rgba(20, 30, 60, .12); }
footer { margin-top: 14px; color: var(--muted); font-size: 13px; }
@media (max-width: 700px) {
  body { padding: 12px; }
  main { flex-direction: column; }
  textarea, #translation { min-height: 120px; }
  #attention-frame { height: 520px; }
}
</style>
</head>
<body>
<h1>attn translate <small>a Transformer from the tensor up</small></h1>
<div class="bar">
  <label for="source">From</label>
  <select id="source" aria-label="Source language"></select>
  <button id="swap" type="button" title="Swap the languages" aria-label="Swap the languages">&#8644;</button>
  <label for="target">To</label>
  <select id="target" aria-label="Target language"></select>
  <span id="key-box" hidden><label for="api-key">API key</label> <input id="api-key" type="password" autocomplete="off"></span>
</div>
<main>
  <section class="panel">
    <textarea id="text" aria-label="Text to translate" placeholder="Type English text here" autofocus></textarea>
  </section>
  <section class="panel" aria-live="polite">
    <div id="translation" data-state="idle" data-text="" aria-label="Translation"></div>
    <ol id="alternatives" aria-label="Alternatives (the beam's next best)" title="The beam's next best"></ol>
  </section>
</main>
<div id="status" role="status"></div>
<div class="bar" style="margin-top:10px">
  <button id="go" type="button" class="primary" title="Ctrl+Enter">Translate</button>
  <button id="show-attention" type="button" aria-expanded="false" disabled>Show attention</button>
</div>
<section id="attention" hidden>
  <iframe id="attention-frame" title="Attention of the translation" sandbox="allow-scripts"></iframe>
</section>
<footer>Every request goes to this server only. API: POST /translate (LibreTranslate's), GET /languages.</footer>
<script>
"use strict";
const $ = id => document.getElementById(id);
const state = {languages: [], seq: 0, timer: 0, key: false, lastText: null};
function setStatus(text, error) {
  $("status").textContent = text || "";
  $("status").className = error ? "error" : "";
}
function targetsOf(code) {
  const l = state.languages.find(x => x.code === code);
  return l ? l.targets : [];
}
function nameOf(code) {
  const l = state.languages.find(x => x.code === code);
  return l ? l.name : code;
}
function fillTargets(prefer) {
  const t = $("target"), targets = targetsOf($("source").value);
  t.textContent = "";
  for (const code of targets) t.add(new Option(nameOf(code), code));
  if (targets.includes(prefer)) t.value = prefer;
  $("swap").disabled = !targetsOf(t.value).includes($("source").value);
}
async function getJson(path) {
  const r = await fetch(path);
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}
function body(extra) {
  const b = Object.assign({q: $("text").value, source: $("source").value, target: $("target").value}, extra);
  if (state.key) b.api_key = $("api-key").value;
  return JSON.stringify(b);
}
async function post(path, extra) {
  return fetch(path, {method: "POST", headers: {"Content-Type": "application/json"}, body: body(extra)});
}
async function translateNow() {
  clearTimeout(state.timer);
  const text = $("text").value, seq = ++state.seq, out = $("translation");
  if (!text.trim()) {
    out.textContent = "";
    out.dataset.state = "idle";
    out.dataset.text = "";
    $("alternatives").textContent = "";
    $("show-attention").disabled = true;
    setStatus("");
    return;
  }
  out.dataset.state = "busy";
  setStatus("Translating\u2026");
  try {
    const r = await post("translate", {format: "text", alternatives: 3});
    const j = await r.json();
    if (seq !== state.seq) return;  // a newer request is on its way
    if (!r.ok) throw new Error(j.error || ("HTTP " + r.status));
    out.textContent = j.translatedText;
    out.dataset.text = j.translatedText;
    out.dataset.source = text;
    out.dataset.state = "done";
    const alts = $("alternatives");
    alts.textContent = "";
    for (const a of j.alternatives || []) {
      const li = document.createElement("li");
      li.textContent = a;
      alts.appendChild(li);
    }
    state.lastText = text;
    $("show-attention").disabled = false;
    setStatus("");
    if (!$("attention").hidden) showAttention();
  } catch (e) {
    if (seq !== state.seq) return;
    out.dataset.state = "error";
    setStatus(String(e.message || e), true);
  }
}
async function showAttention() {
  const frame = $("attention-frame");
  setStatus("Drawing the attention\u2026");
  try {
    const r = await post("attention", {});
    const html = await r.text();
    if (!r.ok) throw new Error(JSON.parse(html).error || ("HTTP " + r.status));
    frame.srcdoc = html;
    $("attention").hidden = false;
    $("show-attention").textContent = "Hide attention";
    $("show-attention").setAttribute("aria-expanded", "true");
    setStatus("");
  } catch (e) {
    setStatus(String(e.message || e), true);
  }
}
function toggleAttention() {
  if ($("attention").hidden) return showAttention();
  $("attention").hidden = true;
  $("show-attention").textContent = "Show attention";
  $("show-attention").setAttribute("aria-expanded", "false");
}
async function main() {
  try {
    const settings = await getJson("frontend/settings");
    state.languages = await getJson("languages");
    state.key = !!settings.keyRequired;
    $("key-box").hidden = !state.key;
    const s = $("source");
    for (const l of state.languages) if (l.targets.length) s.add(new Option(l.name, l.code));
    s.value = settings.language.source.code;
    fillTargets(settings.language.target.code);
    if (settings.charLimit > 0) $("text").maxLength = settings.charLimit;
    $("text").placeholder = "Type " + nameOf(s.value) + " text here";
  } catch (e) {
    setStatus("Cannot reach the server: " + (e.message || e), true);
    return;
  }
  $("text").addEventListener("input", () => {
    clearTimeout(state.timer);
    state.timer = setTimeout(translateNow, 350);
  });
  $("text").addEventListener("keydown", e => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); translateNow(); }
  });
  $("go").addEventListener("click", translateNow);
  $("show-attention").addEventListener("click", toggleAttention);
  $("source").addEventListener("change", () => { fillTargets($("target").value); translateNow(); });
  $("target").addEventListener("change", () => { fillTargets($("target").value); translateNow(); });
  $("swap").addEventListener("click", () => {
    const s = $("source").value, t = $("target").value;
    if (!targetsOf(t).includes(s)) return;
    $("source").value = t;
    fillTargets(s);
    if ($("translation").dataset.state === "done") $("text").value = $("translation").dataset.text;
    translateNow();
  });
}
main();
</script>
</body>
</html>
)page";

}  // namespace

const std::string& page_html() {
  static const std::string page = viz::detail::html_page("attn translate", kPage);
  return page;
}

}  // namespace attn::serve
