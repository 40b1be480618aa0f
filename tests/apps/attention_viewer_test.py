#!/usr/bin/env python3
"""attn attention --html and --json, checked in headless Chromium.

Writes the viewer and the JSON for one sentence, then checks:
  * the page embeds exactly the JSON file's numbers and tokens, and the view
    asked for on the command line;
  * the page references nothing on the network (no http(s) URL but the SVG
    namespace name, no <link>, no src=, no @import, no url() but #ids);
  * in Chromium (--dump-dom), the view shown is the one chosen by the command
    line or by the URL's fragment: title, caption, the <output id="check">
    fields, every heatmap cell's weight equal to the JSON's (one head, or the
    mean of the heads), the hovered query's row highlighted, and the sum of
    every weight the page parsed equal to the JSON's;
  * a page whose data hold cross-attention only (as an RNN decoder's would)
    offers that kind alone and shows it whatever kind the URL asks for;
  * a screenshot (PNG, decoded here) has the window's size and shows the
    chosen matrix's colours and the highlight colour of the chosen buttons.
Without Chromium the test says so and exits 77 (skipped) after the checks
that need no browser.
"""
import argparse
import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

SKIP = 77
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)
    return ok


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


def embedded(page, element_id):
    m = re.search(r'<script type="application/json" id="%s">(.*?)</script>' % element_id, page, re.S)
    return json.loads(m.group(1)) if m else None


class Dom(html.parser.HTMLParser):
    """What the checks read from a dumped DOM."""

    def __init__(self):
        super().__init__()
        self.title, self.caption, self.check = "", "", {}
        self.cells, self.focus_ticks, self.kind_buttons = [], [], []
        self._in, self._group = None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and a.get("class") == "group":
            self._group = a.get("id")
        elif tag == "button" and self._group == "kinds":
            self._in = "kind"
            self.kind_buttons.append("")
        elif tag == "title":
            self._in = "title"
        elif a.get("id") == "caption":
            self._in = "caption"
        elif tag == "output" and a.get("id") == "check":
            self.check = {k[5:]: v for k, v in a.items() if k.startswith("data-")}
        elif tag == "rect" and "data-w" in a:
            self.cells.append(a["data-w"])
        elif tag == "text" and a.get("class") == "tick focus":
            self._in = "focus"

    def handle_endtag(self, tag):
        self._in = None
        if tag == "div":
            self._group = None

    def handle_data(self, data):
        if self._in == "title":
            self.title += data
        elif self._in == "caption":
            self.caption += data
        elif self._in == "focus":
            self.focus_ticks.append(data)
        elif self._in == "kind":
            self.kind_buttons[-1] += data


def chromium_args(chromium, work):
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--hide-scrollbars", "--force-color-profile=srgb", "--window-size=1200,800",
            f"--user-data-dir={work}/chromium-profile"]


def dump_dom(chromium, work, url):
    r = subprocess.run(chromium_args(chromium, work) + ["--dump-dom", url], capture_output=True,
                       text=True, timeout=180)
    if r.returncode != 0:
        print(r.stderr[-2000:])
    dom = Dom()
    dom.feed(r.stdout)
    return dom


def png_pixels(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, color = ihdr[:4]
    assert depth == 8 and color in (2, 6), f"PNG depth {depth} colour type {color}"
    bpp = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


REDS = [0xfff5f0, 0xfee0d2, 0xfcbba1, 0xfc9272, 0xfb6a4a, 0xef3b2c, 0xcb181d, 0xa50f15, 0x67000d]


def reds(t):
    """The page's colour of weight t (JavaScript's Math.round: halves up)."""
    t = min(1.0, max(0.0, t)) * (len(REDS) - 1)
    i = min(len(REDS) - 2, int(t))
    f = t - i
    return tuple(int(((REDS[i] >> s) & 255) * (1 - f) + ((REDS[i + 1] >> s) & 255) * f + 0.5)
                 for s in (16, 8, 0))


def shown_matrix(data, kind, layer, head):
    """The matrix the page shows: one head, or the mean summed in head order."""
    L = data["attention"][kind][layer - 1]
    if head != "all":
        return L[head - 1]
    out = []
    for q in range(len(L[0])):
        row = []
        for k in range(len(L[0][0])):
            s = 0.0
            for H in L:
                s += H[q][k]
            row.append(s / len(L))
        out.append(row)
    return out


def check_view(dom, data, kind, layer, head, query, name):
    label = {"encoder": "Encoder self-attention", "decoder_self": "Decoder self-attention",
             "decoder_cross": "Decoder cross-attention"}[kind]
    head_text = "All heads (mean)" if head == "all" else f"Head {head}"
    caption = f"Layer {layer} \u00b7 {head_text} \u00b7 {label}"
    check(dom.caption == caption, f"{name}: caption {dom.caption!r}, expected {caption!r}")
    check(dom.title.startswith(caption), f"{name}: title {dom.title!r}")
    c = dom.check
    check(c.get("kind") == kind and c.get("layer") == str(layer) and c.get("head") == str(head)
          and c.get("query") == str(query), f"{name}: the page's check fields {c}")
    m = shown_matrix(data, kind, layer, head)
    want = [w for row in m for w in row]
    got = [float(w) for w in dom.cells]
    check(got == want, f"{name}: heatmap cells {got[:6]}... differ from the JSON's {want[:6]}...")
    view_sum = 0.0
    for w in want:
        view_sum += w
    check(float(c.get("view-sum", "nan")) == view_sum,
          f"{name}: view sum {c.get('view-sum')} != {view_sum!r}")
    total = 0.0
    for k in ("encoder", "decoder_self", "decoder_cross"):
        for L in data["attention"][k]:
            for H in L:
                for row in H:
                    for w in row:
                        total += w
    check(float(c.get("total-sum", "nan")) == total,
          f"{name}: sum of the page's weights {c.get('total-sum')} != the JSON's {total!r}")
    queries = data["source_tokens"] if kind == "encoder" else data["target_tokens"]
    want_focus = [queries[query - 1]] if query else []
    check(dom.focus_ticks == want_focus, f"{name}: highlighted row {dom.focus_ticks}, expected {want_focus}")
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attn", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    page_path, json_path = f"{a.work}/view/home.html", f"{a.work}/view/home.json"
    cmd = [a.attn, "attention", "--model", a.model, "i'm home .", "--out", f"{a.work}/pics/home",
           "--json", json_path, "--html", page_path, "--layer", "2", "--head", "3", "--kind", "encoder"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout, r.stderr, sep="")
    if not check(r.returncode == 0, f"attn attention exited {r.returncode}"):
        finish()
    size = os.path.getsize(page_path)
    check(f"viewer: {page_path} ({size} bytes, self-contained" in r.stdout,
          f"stdout does not report the page's size ({size} bytes)")
    data = json.load(open(json_path))
    check(data["num_layers"] == 2 and data["num_heads"] == 4, "JSON: d2l's 2 layers and 4 heads")
    for kind in ("encoder", "decoder_self", "decoder_cross"):
        for L in data["attention"][kind]:
            for H in L:
                for row in H:
                    check(abs(sum(row) - 1) < 1e-5, f"JSON: a {kind} row sums to {sum(row)}")
    page = open(page_path, encoding="utf-8").read()
    check(embedded(page, "attn-data") == data, "the page's embedded data differ from the JSON file")
    check(embedded(page, "attn-view") == {"layer": 2, "head": 3, "kind": "encoder"},
          f"the page's initial view: {embedded(page, 'attn-view')}")
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", page))
    check(urls <= {"http://www.w3.org/2000/svg"}, f"the page names URLs: {urls}")
    check(not re.search(r"<link|\bsrc\s*=|@import|url\((?!#)", page), "the page loads a resource")
    finish()

    if not os.access(a.chromium, os.X_OK):
        print(f"chromium not found ({a.chromium}): the browser checks are skipped "
              "(scripts/install-deps.sh installs it)")
        sys.exit(SKIP)
    url = "file://" + os.path.abspath(page_path)
    # The command line's view; then views chosen by the URL's fragment.
    check_view(dump_dom(a.chromium, a.work, url), data, "encoder", 2, 3, 0, "default view")
    query = min(3, len(data["target_tokens"]))  # a short run's translation may be short
    fragment = f"#layer=1&head=2&kind=cross&query={query}"
    check_view(dump_dom(a.chromium, a.work, url + fragment), data, "decoder_cross", 1, 2, query,
               fragment)
    check_view(dump_dom(a.chromium, a.work, url + "#layer=2&head=all&kind=self"), data,
               "decoder_self", 2, "all", 0, "#layer=2&head=all&kind=self")
    dom = dump_dom(a.chromium, a.work, url)
    check(len(dom.kind_buttons) == 3, f"kind buttons {dom.kind_buttons}, expected 3")
    # A model with cross-attention only (an RNN decoder's): the other kinds
    # are not offered, and a view asking for one shows cross-attention.
    cross_only = dict(data, attention=dict(data["attention"], encoder=[], decoder_self=[]))
    text = json.dumps(cross_only, ensure_ascii=False).replace("<", "\\u003c")
    m = re.search(r'(<script type="application/json" id="attn-data">)(.*?)(</script>)', page, re.S)
    with open(f"{a.work}/view/cross-only.html", "w", encoding="utf-8") as f:
        f.write(page[:m.start(2)] + text + page[m.end(2):])
    dom = dump_dom(a.chromium, a.work, "file://" + os.path.abspath(f"{a.work}/view/cross-only.html")
                   + "#layer=2&head=1&kind=encoder")
    check(len(dom.kind_buttons) == 1 and dom.kind_buttons[0].startswith("Cross"),
          f"cross-only page: kind buttons {dom.kind_buttons}")
    check_view(dom, cross_only, "decoder_cross", 2, 1, 0, "cross-only page, #kind=encoder")
    shot = f"{a.work}/view/home.png"
    fragment = f"#layer=2&head=4&kind=cross&query={min(2, len(data['target_tokens']))}"
    r = subprocess.run(chromium_args(a.chromium, a.work) + [f"--screenshot={shot}", url + fragment],
                       capture_output=True, text=True, timeout=180)
    if not check(r.returncode == 0 and os.path.exists(shot), f"no screenshot ({r.stderr[-500:]})"):
        finish()
    w, h, rows = png_pixels(shot)
    check((w, h) == (1200, 800), f"screenshot is {w}x{h}, not 1200x800")
    counts = {}
    for row in rows:
        for p in row:
            counts[p] = counts.get(p, 0) + 1
    m = shown_matrix(data, "decoder_cross", 2, 4)
    top = max(w for row in m for w in row)
    for q, row in enumerate(m):
        for k, wt in enumerate(row):
            if wt >= 0.9 * top:
                n = counts.get(reds(wt), 0)
                check(n >= 100, f"screenshot: the cell ({q + 1}, {k + 1}) of weight {wt:.4f}, "
                                f"colour {reds(wt)}, covers {n} pixels")
    blue = counts.get((0x1f, 0x5f, 0xb4), 0)
    check(blue >= 1000, f"screenshot: {blue} pixels of the chosen buttons' blue")
    print(f"screenshot {shot} ({fragment}): {w}x{h}, page {size} bytes")
    finish()
    print("all checks passed")


if __name__ == "__main__":
    main()
