// The page of `attn serve` in a real browser: Debian's Chromium, headless,
// driven by puppeteer-core (tools/node_modules, installed by
// scripts/install-deps.sh). It types a sentence as a user does, waits for
// the translation (as you type, debounced) and checks that it is what
// `attn translate` gives; swaps nothing it cannot; opens the attention view
// by keyboard and checks that the viewer drew the translation's weights;
// checks the page at a phone's width; and that nothing was fetched from
// anywhere but the server. Screenshots go to --screenshots (default: the
// work directory; docs/images for the documentation's).
//
//   node page_test.mjs --attn ATTN --model DIR --work DIR --tools TOOLS [--screenshots DIR]
//
// Exit 77 (skipped) without puppeteer-core or Chromium. Waits are bounded
// only to end a hung test.
import { spawn, execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
const work = args.work;
let failures = 0;
function check(ok, what) {
  console.log((ok ? "ok    " : "FAIL  ") + what);
  if (!ok) failures += 1;
}
const shots = args.screenshots || work;
fs.mkdirSync(work, { recursive: true });
fs.mkdirSync(shots, { recursive: true });
const chromium = "/usr/bin/chromium";
let puppeteer;
try {
  puppeteer = createRequire(path.resolve(args.tools, "package.json"))("puppeteer-core");
} catch (e) {
  console.log(`skipped: no puppeteer-core in ${args.tools}/node_modules (scripts/install-deps.sh): ${e.message}`);
  process.exit(77);
}
if (!fs.existsSync(chromium)) {
  console.log(`skipped: no ${chromium}`);
  process.exit(77);
}

// The first held-out test source whose translation is not empty.
const sources = fs.readFileSync(path.join(args.model, "data", "test.tsv"), "utf8").split("\n")
  .filter(l => l.includes("\t")).slice(0, 40).map(l => l.split("\t")[0]);
const translations = execFileSync(args.attn, ["translate", "--model", args.model], { input: sources.join("\n") + "\n", encoding: "utf8" }).split("\n");
const pick = translations.findIndex(t => t.trim().length > 0);
const sentence = sources[Math.max(pick, 0)];
const expected = translations[Math.max(pick, 0)];
check(pick >= 0, `a sentence with a translation: ${JSON.stringify(sentence)} -> ${JSON.stringify(expected)}`);

// The server on a free port.
const log = fs.openSync(path.join(work, "serve.log"), "w");
const server = spawn(args.attn, ["serve", "--model", args.model, "--port", "0"], { stdio: ["ignore", "pipe", log] });
const first = await new Promise((resolve, reject) => {
  readline.createInterface({ input: server.stdout }).once("line", resolve);
  server.once("exit", code => reject(new Error(`attn serve exited ${code}`)));
});
const port = Number(/listening on http:\/\/[0-9.]+:(\d+)/.exec(first)[1]);
const origin = `http://127.0.0.1:${port}`;

const profile = path.join(work, "chromium-profile");
fs.rmSync(profile, { recursive: true, force: true });
const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run", `--user-data-dir=${profile}`],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 900 });
  const fetched = [];
  page.on("request", r => fetched.push(r.url()));
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  await page.goto(origin + "/", { waitUntil: "load" });
  await page.waitForFunction(() => document.getElementById("target").options.length > 0, { timeout: 300000 });
  const pair = await page.evaluate(() => [document.getElementById("source").value, document.getElementById("target").value]);
  check(pair[0] === "en" && pair[1] === "fr", `the pair offered: ${pair}`);
  const swap = await page.$eval("#swap", b => b.disabled);
  check(swap === true, "swap is disabled: no model translates French to English here");

  // Typed as a user types it, into the focused text box.
  await page.focus("#text");
  await page.keyboard.type(sentence, { delay: 5 });
  await page.waitForFunction(s => {
    const t = document.getElementById("translation");
    return t.dataset.state === "done" && t.dataset.source === s;
  }, { timeout: 300000 }, sentence);
  const shown = await page.$eval("#translation", t => t.dataset.text);
  check(shown === expected, `the page's translation ${JSON.stringify(shown)} == attn translate's ${JSON.stringify(expected)}`);
  const visible = await page.$eval("#translation", t => t.textContent);
  check(visible === expected, "the translation is shown as text");
  await page.screenshot({ path: path.join(shots, "serve-page.png") });

  // The attention view, by keyboard: Tab to the button, Enter.
  await page.focus("#go");
  await page.keyboard.press("Tab");
  const focused = await page.evaluate(() => document.activeElement.id);
  check(focused === "show-attention", `Tab from Translate reaches ${focused}`);
  await page.keyboard.press("Enter");
  const frameHandle = await page.waitForSelector("#attention-frame", { visible: true, timeout: 300000 });
  const frame = await frameHandle.contentFrame();
  await frame.waitForFunction(() => {
    const c = document.getElementById("check");
    return c && c.dataset.totalSum && Number(c.dataset.totalSum) > 0;
  }, { timeout: 300000 });
  const view = await frame.evaluate(() => {
    const c = document.getElementById("check");
    return { kind: c.dataset.kind, sum: Number(c.dataset.viewSum), title: document.getElementById("sentence").textContent };
  });
  check(view.kind === "decoder_cross", `the viewer shows ${view.kind}`);
  check(view.title.includes(expected), `the viewer's translation is the page's: ${JSON.stringify(view.title)}`);
  // Each query's cross-attention weights sum to 1 (the mean of the heads too).
  const rows = await frame.evaluate(() => document.querySelectorAll("#heatmap g > g").length);
  check(rows > 0 && Math.abs(view.sum - rows) < 1e-3 * rows, `${rows} query rows, weights summing to ${view.sum}`);
  await page.screenshot({ path: path.join(shots, "serve-attention.png"), fullPage: true });

  // A phone's width: one column, nothing wider than the screen.
  await page.setViewport({ width: 390, height: 844, isMobile: true });
  const wide = await page.evaluate(() => document.documentElement.scrollWidth);
  check(wide <= 391, `at 390 px the page is ${wide} px wide`);
  await page.screenshot({ path: path.join(shots, "serve-phone.png") });

  const foreign = fetched.filter(u => !u.startsWith(origin + "/") && !u.startsWith("about:") && !u.startsWith("data:"));
  check(foreign.length === 0, `nothing fetched from elsewhere (${fetched.length} requests${foreign.length ? ": " + foreign.join(", ") : ""})`);
  check(errors.length === 0, `no script error${errors.length ? ": " + errors.join("; ") : ""}`);
} finally {
  await browser.close();
  server.kill("SIGTERM");
}
const code = await new Promise(resolve => server.once("exit", resolve));
check(code === 0, `the server exits ${code} at SIGTERM`);
console.log(failures ? `${failures} checks failed` : "all checks passed");
process.exit(failures ? 1 : 0);
