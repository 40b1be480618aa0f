#!/usr/bin/env node
// Translates English sentences with a model written by `attn export --onnx`,
// in ONNX Runtime (onnxruntime-node), greedily and with the KV cache: the
// first call runs the encoder (its cross-attention cache is empty) and every
// later call one decoder step, feeding each present_* output back as the
// next past_* input. The file is self-contained: config.json and both
// vocabularies are read from its metadata.
//
//   node tools/onnx_translate.mjs MODEL.onnx [options] [SENTENCE...]   (none: stdin, one per line)
//
//   --threads N   ONNX Runtime's intra-op threads (default 1); inter-op threads are 1
//   --no-spin     intra-op threads sleep while they wait instead of spinning
//                 (session.intra_op.allow_spinning 0; OMP_WAIT_POLICY=PASSIVE's
//                 counterpart, for a machine whose cores are shared)
//   --batch N     sentences decoded together (default 256, as `attn translate` reads stdin)
//   --dump FILE   also write, as JSON, every step's token ids and logits (all
//                 sentences in one batch), and the largest differences from
//                 the stepwise logits of one call over the whole greedy
//                 prefix (tgt_len > 1, an empty cache) and of the first step
//                 of the sentences shorter than num_steps, with their sources
//                 cut to their longest valid length (another src_len)
//   --metrics-json FILE  write {"sentences", "seconds", "sentences_per_s"}:
//                 the time from the first batch in to the last line out,
//                 without loading the model (as `attn translate --metrics-json`)
//
// Sentences are preprocessed as d2l and attn do (lower case, a space before
// , . ! ? that follow a character other than a space, split on ' '), mapped
// to ids (unknown words to <unk>, wherever the vocabulary holds it), given
// <eos>, and cut or padded to num_steps; decoding stops at <eos> or after
// num_steps tokens. Prints one translation per line. A subword model (its
// config's tokenizer "spm") is refused in one line: its text would need its
// SentencePiece model, which this tool does not run.
import { readFileSync, writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import ort from "onnxruntime-node";

function fail(message) {
  process.stderr.write(`onnx_translate: error: ${message}\n`);
  process.exit(1);
}

// The metadata_props (field 14 of ModelProto: key 1, value 2) of an ONNX
// file, read from its protobuf encoding directly: onnxruntime-node does not
// expose custom metadata.
function onnxMetadata(bytes) {
  let pos = 0;
  const varint = (buf, end) => {
    let value = 0n, shift = 0n;
    for (;;) {
      if (pos >= end) throw new Error("truncated varint");
      const b = buf[pos++];
      value |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return value;
      shift += 7n;
    }
  };
  const fields = (buf, start, end, onField) => {
    pos = start;
    while (pos < end) {
      const key = Number(varint(buf, end));
      const field = key >> 3, wire = key & 7;
      if (wire === 0) varint(buf, end);
      else if (wire === 1) pos += 8;
      else if (wire === 5) pos += 4;
      else if (wire === 2) {
        const len = Number(varint(buf, end));
        const s = pos;
        pos += len;
        if (pos > end) throw new Error("truncated field");
        const after = pos;
        onField(field, s, s + len);
        pos = after;
      } else throw new Error(`unsupported wire type ${wire}`);
    }
  };
  const meta = {};
  const text = (s, e) => Buffer.from(bytes.subarray(s, e)).toString("utf8");
  fields(bytes, 0, bytes.length, (field, s, e) => {
    if (field !== 14) return;
    let key = "", value = "";
    fields(bytes, s, e, (f, a, b) => {
      if (f === 1) key = text(a, b);
      if (f === 2) value = text(a, b);
    });
    meta[key] = value;
  });
  return meta;
}

function vocabulary(text, what) {
  if (!text) fail(`the model has no ${what} in its metadata: not written by 'attn export --onnx'?`);
  const tokens = text.split("\n");
  tokens.pop();  // every line ends in \n
  const index = new Map(tokens.map((t, i) => [t, i]));
  const id = (t) => {
    if (!index.has(t)) fail(`the ${what} has no ${t}`);
    return index.get(t);
  };
  return { tokens, index, unk: id("<unk>"), pad: id("<pad>"), eos: id("<eos>"), id };
}

// d2l's preprocess_nmt and split(' ').
function tokenize(sentence) {
  const text = sentence.replaceAll("\u202f", " ").replaceAll("\xa0", " ").toLowerCase();
  let out = "";
  for (let i = 0; i < text.length; ++i) {
    const c = text[i];
    out += i > 0 && ",.!?".includes(c) && text[i - 1] !== " " ? " " + c : c;
  }
  return out.split(" ");
}

function parseArgs(argv) {
  const a = { model: null, threads: 1, spin: true, batch: 256, dump: null, metrics: null, sentences: [] };
  const positive = (name, v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) fail(`${name} must be a positive integer, got '${v}'`);
    return n;
  };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) fail(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === "--threads") a.threads = positive(arg, value());
    else if (arg === "--no-spin") a.spin = false;
    else if (arg === "--batch") a.batch = positive(arg, value());
    else if (arg === "--dump") a.dump = value();
    else if (arg === "--metrics-json") a.metrics = value();
    else if (arg.startsWith("--")) fail(`unknown option ${arg}`);
    else if (a.model === null) a.model = arg;
    else a.sentences.push(arg);
  }
  if (a.model === null) fail("usage: onnx_translate.mjs MODEL.onnx [--threads N] [--no-spin] [--batch N] [--dump FILE] [--metrics-json FILE] [SENTENCE...]");
  return a;
}

class Translator {
  constructor(session, meta) {
    this.session = session;
    const config = JSON.parse(meta["attn.config"] ?? fail("the model has no attn.config in its metadata"));
    // A subword model's text goes through its SentencePiece model, which
    // this tool does not run: its pieces would come out as if they were
    // text. Refused, rather than printing pieces.
    if ((config.tokenizer ?? "word") !== "word")
      fail(`the model's tokenizer is '${config.tokenizer}' (SentencePiece subwords); this tool ` +
           "translates word models (d2l's) only: use 'attn translate' for it");
    this.numSteps = config.num_steps;
    this.layers = config.num_layers;
    this.heads = config.num_heads;
    this.headDim = config.num_hiddens / config.num_heads;
    this.src = vocabulary(meta["attn.src_vocab"], "source vocabulary");
    this.tgt = vocabulary(meta["attn.tgt_vocab"], "target vocabulary");
    this.bos = this.tgt.id("<bos>");
  }

  emptyCache(B) {
    return new ort.Tensor("float32", new Float32Array(0), [B, this.heads, 0, this.headDim]);
  }

  // Source ids (B, num_steps) and valid lengths (B), as attn's encode_source.
  encode(sentences) {
    const B = sentences.length, T = this.numSteps;
    const ids = new BigInt64Array(B * T), lens = new BigInt64Array(B);
    sentences.forEach((s, b) => {
      const row = tokenize(s).map((t) => this.src.index.get(t) ?? this.src.unk);
      row.push(this.src.eos);
      lens[b] = BigInt(Math.min(row.length, T));
      for (let t = 0; t < T; ++t) ids[b * T + t] = BigInt(t < row.length ? row[t] : this.src.pad);
    });
    return { src: new ort.Tensor("int64", ids, [B, T]), lens: new ort.Tensor("int64", lens, [B]) };
  }

  // One run of the graph: logits and the caches for the next call.
  async run(src, lens, tokens, cache) {
    const feeds = { src_ids: src, src_valid_len: lens, tgt_ids: tokens };
    for (let l = 0; l < this.layers; ++l)
      for (const kv of ["self_key", "self_value", "cross_key", "cross_value"])
        feeds[`past_${kv}.${l}`] = cache[`${kv}.${l}`];
    const out = await this.session.run(feeds);
    const next = {};
    for (let l = 0; l < this.layers; ++l)
      for (const kv of ["self_key", "self_value", "cross_key", "cross_value"])
        next[`${kv}.${l}`] = out[`present_${kv}.${l}`];
    return { logits: out.logits, cache: next };
  }

  // Greedy decoding of one batch; `record` gets each step's ids and logits.
  async translate(sentences, record) {
    const B = sentences.length, V = this.tgt.tokens.length;
    const { src, lens } = this.encode(sentences);
    let cache = {};
    for (let l = 0; l < this.layers; ++l)
      for (const kv of ["self_key", "self_value", "cross_key", "cross_value"])
        cache[`${kv}.${l}`] = this.emptyCache(B);
    let tokens = new ort.Tensor("int64", new BigInt64Array(B).fill(BigInt(this.bos)), [B, 1]);
    const out = sentences.map(() => []), done = new Array(B).fill(false);
    let remaining = B;
    for (let t = 0; t < this.numSteps && remaining > 0; ++t) {
      const r = await this.run(src, lens, tokens, cache);
      cache = r.cache;
      const logits = r.logits.data;  // (B, 1, V)
      const next = new BigInt64Array(B);
      for (let b = 0; b < B; ++b) {
        let best = 0;
        for (let v = 1; v < V; ++v) if (logits[b * V + v] > logits[b * V + best]) best = v;
        next[b] = BigInt(best);
        if (done[b]) continue;
        if (best === this.tgt.eos) {
          done[b] = true;
          --remaining;
        } else {
          out[b].push(this.tgt.tokens[best]);
        }
      }
      if (record) record(Array.from(next, Number), logits);
      tokens = new ort.Tensor("int64", next, [B, 1]);
    }
    return { texts: out.map((toks) => toks.join(" ")), src, lens };
  }
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  let bytes;
  try {
    bytes = readFileSync(a.model);
  } catch (e) {
    fail(`cannot read '${a.model}': ${e.message}`);
  }
  let meta;
  try {
    meta = onnxMetadata(bytes);
  } catch (e) {
    fail(`'${a.model}' is not an ONNX model: ${e.message}`);
  }
  const session = await ort.InferenceSession.create(bytes, {
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
    extra: { session: { intra_op: { allow_spinning: a.spin ? "1" : "0" } } },
  });
  const tr = new Translator(session, meta);
  let sentences = a.sentences;
  if (sentences.length === 0) {
    sentences = readFileSync(0, "utf8").split("\n");
    if (sentences.at(-1) === "") sentences.pop();
  }

  if (a.dump) {
    const steps = [];
    const { texts, src, lens } = await tr.translate(sentences, (ids, logits) =>
      steps.push({ ids, logits: Array.from(logits) }));
    // The whole greedy prefix in one call (tgt_len > 1, causal mask, empty cache).
    const B = sentences.length, T = steps.length, V = tr.tgt.tokens.length;
    let prefillMaxDiff = 0;
    if (T > 0) {
      const prefix = new BigInt64Array(B * T);
      for (let b = 0; b < B; ++b)
        for (let t = 0; t < T; ++t)
          prefix[b * T + t] = BigInt(t === 0 ? tr.bos : steps[t - 1].ids[b]);
      const cache = {};
      for (let l = 0; l < tr.layers; ++l)
        for (const kv of ["self_key", "self_value", "cross_key", "cross_value"])
          cache[`${kv}.${l}`] = tr.emptyCache(B);
      const r = await tr.run(src, lens, new ort.Tensor("int64", prefix, [B, T]), cache);
      for (let b = 0; b < B; ++b)
        for (let t = 0; t < T; ++t)
          for (let v = 0; v < V; ++v)
            prefillMaxDiff = Math.max(prefillMaxDiff,
              Math.abs(r.logits.data[(b * T + t) * V + v] - steps[t].logits[b * V + v]));
    }
    // The first step again for the sentences shorter than num_steps, their
    // sources cut to the longest of their valid lengths (another src_len;
    // the cut positions were masked anyway).
    let trimmedMaxDiff = 0, trimmedLen = 0;
    const N = tr.numSteps;
    const rows = [...Array(B).keys()].filter((b) => Number(lens.data[b]) < N);
    if (T > 0 && rows.length > 0) {
      const S = Math.max(...rows.map((b) => Number(lens.data[b]))), R = rows.length;
      const cut = new BigInt64Array(R * S), cutLens = new BigInt64Array(R);
      rows.forEach((b, r) => {
        cutLens[r] = lens.data[b];
        for (let t = 0; t < S; ++t) cut[r * S + t] = src.data[b * N + t];
      });
      const cache = {};
      for (let l = 0; l < tr.layers; ++l)
        for (const kv of ["self_key", "self_value", "cross_key", "cross_value"])
          cache[`${kv}.${l}`] = tr.emptyCache(R);
      const bos = new ort.Tensor("int64", new BigInt64Array(R).fill(BigInt(tr.bos)), [R, 1]);
      const r = await tr.run(new ort.Tensor("int64", cut, [R, S]),
                             new ort.Tensor("int64", cutLens, [R]), bos, cache);
      rows.forEach((b, i) => {
        for (let v = 0; v < V; ++v)
          trimmedMaxDiff = Math.max(trimmedMaxDiff,
            Math.abs(r.logits.data[i * V + v] - steps[0].logits[b * V + v]));
      });
      trimmedLen = S;
    }
    writeFileSync(a.dump, JSON.stringify({ batch: B, vocab: V, steps, prefill_max_diff: prefillMaxDiff,
                                           trimmed_src_len: trimmedLen, trimmed_max_diff: trimmedMaxDiff }));
    process.stdout.write(texts.map((t) => t + "\n").join(""));
    return;
  }

  const start = performance.now();
  for (let s = 0; s < sentences.length; s += a.batch) {
    const { texts } = await tr.translate(sentences.slice(s, s + a.batch));
    process.stdout.write(texts.map((t) => t + "\n").join(""));
  }
  const seconds = (performance.now() - start) / 1000;
  if (a.metrics)
    writeFileSync(a.metrics, JSON.stringify({ sentences: sentences.length, seconds,
                                              sentences_per_s: sentences.length / seconds }) + "\n");
}

main().catch((e) => fail(e.message));
