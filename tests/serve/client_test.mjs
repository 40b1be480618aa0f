// The shipped model (models/en-fr) served by `attn serve`, and spoken to by
// an existing LibreTranslate client from the npm registry, unchanged:
// libretranslate-ts (tools/node_modules, installed by
// scripts/install-deps.sh). It lists the languages, detects English, and
// translates held-out test sentences, greedy and with alternatives; each
// translation must be what `attn translate` prints for the same sentence.
// Then SIGTERM: the server exits 0.
//
//   node client_test.mjs --attn ATTN --model models/en-fr --work DIR --tools TOOLS
//
// Exit 77 (skipped) without libretranslate-ts. Waits are bounded only to end
// a hung test.
import { spawn, execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
let failures = 0;
function check(ok, what) {
  console.log((ok ? "ok    " : "FAIL  ") + what);
  if (!ok) failures += 1;
}
fs.mkdirSync(args.work, { recursive: true });
let client;
try {
  client = createRequire(path.resolve(args.tools, "package.json"))("libretranslate-ts").libreTranslate;
} catch (e) {
  console.log(`skipped: no libretranslate-ts in ${args.tools}/node_modules (scripts/install-deps.sh): ${e.message}`);
  process.exit(77);
}

// Five held-out test sources, and what the CLI makes of them.
const sources = fs.readFileSync(path.join(args.model, "data", "test.tsv"), "utf8").split("\n")
  .filter(l => l.includes("\t")).slice(0, 5).map(l => l.split("\t")[0]);
const cli = execFileSync(args.attn, ["translate", "--model", args.model], { input: sources.join("\n") + "\n", encoding: "utf8" })
  .split("\n").slice(0, sources.length);

const log = fs.openSync(path.join(args.work, "serve.log"), "w");
const server = spawn(args.attn, ["serve", "--model", args.model, "--port", "0"], { stdio: ["ignore", "pipe", log] });
const exited = new Promise(resolve => server.once("exit", (code, signal) => resolve({ code, signal })));
const timer = setTimeout(() => { console.log("FAIL  the test took more than 5 minutes"); server.kill("SIGKILL"); process.exit(1); }, 300000);
const first = await Promise.race([
  new Promise(resolve => readline.createInterface({ input: server.stdout }).once("line", resolve)),
  exited.then(e => { throw new Error(`attn serve exited ${e.code}`); }),
]);
const port = /127\.0\.0\.1:(\d+)/.exec(first)?.[1];
check(port !== undefined, `the server listens: ${first}`);

try {
  client.setApiEndpoint(`http://127.0.0.1:${port}`);
  client.setApiKey("");
  const languages = await client.listLanguages();
  const en = (languages || []).find(l => l.code === "en");
  check(en !== undefined && en.targets.includes("fr"), `languages: ${JSON.stringify(languages)}`);
  const detected = await client.detect("The weather is nice today and I am going to the station.");
  const best = Array.isArray(detected) ? detected[0] : detected;
  check(best && best.language === "en", `detect: ${JSON.stringify(detected)}`);
  for (let i = 0; i < sources.length; ++i) {
    const r = await client.translate(sources[i], "en", "fr");
    check(r.status === 200 && r.translatedText === cli[i],
          `${JSON.stringify(sources[i])} -> ${JSON.stringify(r.translatedText)} (attn translate: ${JSON.stringify(cli[i])})`);
  }
  const alt = await client.translate(sources[0], "en", "fr", 2);
  check(alt.status === 200 && alt.translatedText === cli[0] && Array.isArray(alt.alternatives) &&
        alt.alternatives.length === 2, `alternatives: ${JSON.stringify(alt)}`);
  // The client checks the pair against /languages itself before it asks.
  const bad = await client.translate(sources[0], "en", "de");
  check(bad.status >= 400 && typeof bad.error === "string" && !bad.translatedText,
        `an unknown target is an error, not a translation: ${JSON.stringify(bad)}`);
} catch (e) {
  check(false, `the client threw: ${e.stack || e}`);
}
server.kill("SIGTERM");
const end = await exited;
check(end.code === 0, `SIGTERM: the server exits 0 (${JSON.stringify(end)})`);
clearTimeout(timer);
console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
