#!/usr/bin/env python3
"""attn against ONNX Runtime on the same model: greedy translation of the
English side of the corpus's first N pairs, side by side.

    ./build/release/attn train --out out/model          # d2l's Transformer (make run)
    python3 bench/onnx_translate.py --attn build/release/attn --model out/model \\
        --sentences 2000 --pairs 3 --threads 1

Exports the model with `attn export --onnx`, then runs, alternately, `attn
translate` (stdin, batches of 256) and tools/onnx_translate.mjs in ONNX
Runtime (onnxruntime-node, batches of 256, the KV cache as the graph's inputs
and outputs), each in a fresh process. Each side reports the seconds from the
first sentence in to the last translation out, without starting up or loading
the model (--metrics-json); the whole command's wall time is printed too.
Checks that both give the same translations, and prints the medians, the
ratio of each pair, the settings of each side and the load average
(`uptime`) before and after. Needs Node.js and tools/node_modules
(scripts/install-deps.sh).
"""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def timed(cmd, stdin_path, env=None):
    """Runs cmd with stdin from a file; returns (stdout lines, wall seconds)."""
    with open(stdin_path, "rb") as stdin:
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdin=stdin, capture_output=True, env=env)
        wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"onnx_translate bench: {' '.join(cmd)} exited {r.returncode}: "
                 f"{r.stderr.decode(errors='replace').strip()}")
    return r.stdout.decode().split("\n")[:-1], wall


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attn", default=os.path.join(ROOT, "build/release/attn"))
    p.add_argument("--model", required=True, help="a model directory (attn train --out)")
    p.add_argument("--corpus", default=os.path.join(ROOT, "datasets/fra-eng/fra.txt.gz"))
    p.add_argument("--sentences", type=int, default=2000)
    p.add_argument("--pairs", type=int, default=3, help="alternating runs of each side")
    p.add_argument("--threads", type=int, default=1,
                   help="attn --threads and ONNX Runtime's intra-op threads")
    p.add_argument("--ort-spin", choices=["on", "off"], default="off",
                   help="whether ONNX Runtime's intra-op threads spin while they wait "
                   "(off: they sleep, as attn's with OMP_WAIT_POLICY=PASSIVE)")
    p.add_argument("--json", action="store_true", help="one JSON line at the end")
    a = p.parse_args()

    with open(os.path.join(a.model, "config.json"), encoding="utf-8") as f:
        tokenizer = json.load(f).get("tokenizer", "word")
    if tokenizer != "word":
        sys.exit(f"onnx_translate bench: {a.model} is a subword model (tokenizer {tokenizer}); "
                 "tools/onnx_translate.mjs translates word models (d2l's) only")
    with gzip.open(a.corpus, "rt", encoding="utf-8") as f:
        sentences = [line.split("\t")[0] for line in f.read().split("\n")[: a.sentences]]
    work = tempfile.mkdtemp(prefix="attn_onnx_bench_")
    src = os.path.join(work, "sentences.txt")
    with open(src, "w", encoding="utf-8") as f:
        f.writelines(s + "\n" for s in sentences)
    onnx = os.path.join(work, "model.onnx")
    subprocess.run([a.attn, "export", "--onnx", a.model, onnx], check=True,
                   stdout=subprocess.DEVNULL)

    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    # Like with like: ONNX Runtime's side decodes greedily, so attn does too
    # (--beam-size 1, whatever the model's own default).
    attn_cmd = [a.attn, "--threads", str(a.threads), "translate", "--model", a.model,
                "--beam-size", "1", "--metrics-json", os.path.join(work, "attn.json")]
    ort_cmd = ["node", os.path.join(ROOT, "tools", "onnx_translate.mjs"), onnx,
               "--threads", str(a.threads), "--batch", "256",
               "--metrics-json", os.path.join(work, "ort.json")]
    if a.ort_spin == "off":
        ort_cmd.append("--no-spin")
    load_before = load_average()
    rows = []
    for _ in range(a.pairs):
        attn_out, attn_wall = timed(attn_cmd, src, env)
        ort_out, ort_wall = timed(ort_cmd, src)
        with open(os.path.join(work, "attn.json")) as f:
            attn_s = json.load(f)["seconds"]
        with open(os.path.join(work, "ort.json")) as f:
            ort_s = json.load(f)["seconds"]
        differ = sum(x != y for x, y in zip(attn_out, ort_out)) + abs(len(attn_out) - len(ort_out))
        rows.append((attn_s, ort_s, attn_wall, ort_wall, differ))
        print(f"pair {len(rows)}: attn {attn_s:.3f} s ({attn_wall:.3f} s whole command), "
              f"ONNX Runtime {ort_s:.3f} s ({ort_wall:.3f} s), ratio {ort_s / attn_s:.2f}, "
              f"{differ} translations differ", flush=True)
    load_after = load_average()

    med = lambda i: statistics.median(r[i] for r in rows)
    ratios = [r[1] / r[0] for r in rows]
    result = {
        "sentences": len(sentences), "pairs": a.pairs, "threads": a.threads,
        "ort_spin": a.ort_spin,
        "attn_s": med(0), "ort_s": med(1), "attn_wall_s": med(2), "ort_wall_s": med(3),
        "ratio": statistics.median(ratios), "ratios": ratios,
        "differing_translations": max(r[4] for r in rows),
        "load_before": load_before, "load_after": load_after,
    }
    ort_version = json.load(open(os.path.join(
        ROOT, "tools", "node_modules", "onnxruntime-node", "package.json")))["version"]
    print(f"\n{len(sentences)} sentences, greedy, batches of 256, medians of {a.pairs} "
          f"alternating pairs; load average before {load_before}, after {load_after}")
    print(f"attn: --threads {a.threads}, OMP_WAIT_POLICY=PASSIVE")
    print(f"ONNX Runtime {ort_version} (onnxruntime-node, CPU): intraOpNumThreads {a.threads}, "
          f"interOpNumThreads 1, intra-op spinning {a.ort_spin}, sequential execution, "
          "graph optimization level all")
    print(f"| | attn | ONNX Runtime | ratio |\n|---|---|---|---|")
    print(f"| translation, s (sentences/s) | {med(0):.3f} ({len(sentences) / med(0):,.0f}) "
          f"| {med(1):.3f} ({len(sentences) / med(1):,.0f}) | {result['ratio']:.2f}x "
          f"({', '.join(f'{r:.2f}' for r in ratios)}) |")
    print(f"| whole command, s | {med(2):.3f} | {med(3):.3f} | {med(3) / med(2):.2f}x |")
    print(f"translations that differ: {result['differing_translations']} of {len(sentences)}")
    if a.json:
        print(json.dumps(result))
    return 0 if result["differing_translations"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
