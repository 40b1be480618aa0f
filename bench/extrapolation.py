#!/usr/bin/python3
"""Train short, test long: does a positional scheme carry a translator past
the sentence lengths it was trained on? (Press, Smith and Lewis, ICLR 2022,
asked it of language models; this asks it of attn's English->French
translator.)

    /usr/bin/python3 bench/extrapolation.py train --out out/extrapolation
    /usr/bin/python3 bench/extrapolation.py score --out out/extrapolation

`train` runs the tatoeba recipe once per scheme (--positions sinusoidal,
learned, rotary, alibi, relative) on the training pairs of at most
--max-length subword tokens a side (<eos> included; default 16), each for
the same --epochs over those pairs (a fixed number of steps, so the load of
the machine changes the minutes, never the models). A run that exists is
kept; an interrupted one is resumed (attn train --resume).

Then, as the ceiling, it trains the recipe (sinusoidal) once more on every
length: the corpus without any pair whose English sentence is held out or in
a bucket below, validated on the same pairs, for the same --epochs (more
steps, since more pairs pass). Its row says how much of the fall with length
is length unseen in training and how much is long sentences being harder.

`score` buckets pairs by their English side's length in the runs' subword
tokens (<eos> included): <= 16, 17-24, 25-32, 33+. Each bucket holds the
held-out test pairs of that length and, since the test split has few long
sentences, the corpus's pairs of that length whose English sentence is in
neither held-out split: every one of them was dropped from training by the
length limit, so no run saw them (at most --per-bucket, drawn with a fixed
seed). Each run is scored on each bucket with `attn evaluate --json`
(beam 4, sacreBLEU; the per-token loss of the references), and the results
written as a Markdown table, a JSON file and an SVG figure (BLEU against
length, one line per scheme) under --out.

Needs python3-sentencepiece (Debian's, for /usr/bin/python3).
"""
import argparse
import gzip
import json
import os
import random
import subprocess
import sys

SCHEMES = ["sinusoidal", "learned", "rotary", "alibi", "relative"]
BUCKETS = [("<= 16", 0, 16), ("17-24", 17, 24), ("25-32", 25, 32), ("33+", 33, 10**9)]
CORPUS = "datasets/fra-eng/fra.txt.gz"
REFERENCE = "every-length"  # the ceiling's run: sinusoidal, trained on every length


def run_dir(out, scheme):
    return os.path.join(out, scheme)


def train_run(args, name, flags):
    d = run_dir(args.out, name)
    if os.path.exists(os.path.join(d, "model.safetensors")):
        print(f"{name}: trained ({d})")
        return
    cmd = [args.attn, "train", "--preset", "tatoeba", *flags, "--epochs", str(args.epochs),
           "--time-limit", "0", "--out", d, "--log", d + ".log", "--log-every", "60s",
           "--metrics-json", d + "-metrics.json"]
    if os.path.exists(os.path.join(d, "checkpoint.safetensors")):
        cmd.append("--resume")
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def train(args):
    for scheme in args.schemes:
        train_run(args, scheme, ["--data", args.corpus, "--positions", scheme,
                                 "--max-length", str(args.max_length)])
    # The ceiling: every length, none of the held-out or bucketed sentences.
    first = run_dir(args.out, args.schemes[0])
    pairs, _ = buckets(args)
    unseen = {s for split in ("valid", "test")
              for s, _ in read_pairs(os.path.join(first, "data", split + ".tsv"))}
    unseen |= {s for bucket in pairs for s, _ in bucket}
    corpus = os.path.join(args.out, "reference-train.tsv")
    with open(corpus, "w", encoding="utf-8") as f:
        for s, t in read_pairs(args.corpus):
            if s not in unseen:
                f.write(f"{s}\t{t}\n")
    train_run(args, REFERENCE, ["--data", corpus, "--positions", "sinusoidal",
                                "--valid-data", os.path.join(first, "data", "valid.tsv"),
                                "--test-data", os.path.join(first, "data", "test.tsv")])


def read_pairs(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) >= 2 and cols[0] and cols[1]:
                yield cols[0], cols[1]


def buckets(args):
    """The pairs of each bucket, and where they came from."""
    import sentencepiece as spm
    first = run_dir(args.out, args.schemes[0])
    sp = spm.SentencePieceProcessor(model_file=os.path.join(first, "spm.model"))
    held = {s for split in ("valid", "test")
            for s, _ in read_pairs(os.path.join(first, "data", split + ".tsv"))}
    test = list(read_pairs(os.path.join(first, "data", "test.tsv")))

    def bucket_of(source):
        n = len(sp.encode(source)) + 1
        return next(i for i, (_, lo, hi) in enumerate(BUCKETS) if lo <= n <= hi)

    out = [[] for _ in BUCKETS]
    from_test = [0] * len(BUCKETS)
    for s, t in test:
        b = bucket_of(s)
        out[b].append((s, t))
        from_test[b] += 1
    dropped = [[] for _ in BUCKETS]
    for s, t in read_pairs(args.corpus):
        if s in held:
            continue
        b = bucket_of(s)
        if b > 0:
            dropped[b].append((s, t))
    rng = random.Random(0)
    for b in range(1, len(BUCKETS)):
        room = max(0, args.per_bucket - len(out[b]))
        extra = dropped[b] if len(dropped[b]) <= room else rng.sample(dropped[b], room)
        out[b].extend(extra)
    if len(out[0]) > args.per_bucket:
        out[0] = rng.sample(out[0], args.per_bucket)
        from_test[0] = len(out[0])
    return out, from_test


def evaluate(args, model, data):
    cmd = [args.attn, "evaluate", "--model", model, "--data", data, "--json"]
    res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(res.stdout)


def svg(results, path):
    """BLEU against the bucket, one line per scheme."""
    w, h, left, bottom, top, right = 580, 340, 60, 50, 20, 150
    top_bleu = max([r["bleu"] for rs in results.values() for r in rs] + [1.0])
    ymax = 10 * (int(top_bleu / 10) + 1)
    n = len(BUCKETS)
    x = lambda i: left + (w - left - right) * (i + 0.5) / n
    y = lambda v: top + (h - top - bottom) * (1 - v / ymax)
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             'font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>']
    for v in range(0, ymax + 1, 10):
        parts.append(f'<line x1="{left}" x2="{w - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                     'stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v}</text>')
    for i, (name, _, _) in enumerate(BUCKETS):
        parts.append(f'<text x="{x(i):.1f}" y="{h - bottom + 18}" text-anchor="middle">'
                     f'{name.replace("<", "&lt;")}</text>')
    parts.append(f'<text x="{(left + w - right) / 2}" y="{h - 8}" text-anchor="middle">'
                 'English side, subword tokens with &lt;eos&gt; (trained on &lt;= 16)</text>')
    parts.append(f'<text x="14" y="{(top + h - bottom) / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {(top + h - bottom) / 2})">BLEU (beam 4)</text>')
    for k, (scheme, rs) in enumerate(results.items()):
        c = "#777" if scheme == REFERENCE else colors[k % len(colors)]
        dash = ' stroke-dasharray="5,4"' if scheme == REFERENCE else ""
        pts = " ".join(f"{x(i):.1f},{y(r['bleu']):.1f}" for i, r in enumerate(rs))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
        for i, r in enumerate(rs):
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(r["bleu"]):.1f}" r="3" fill="{c}"/>')
        ly = top + 10 + 18 * k
        parts.append(f'<line x1="{w - right + 12}" x2="{w - right + 32}" y1="{ly}" y2="{ly}" '
                     f'stroke="{c}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{w - right + 38}" y="{ly + 4}">{scheme}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def score(args):
    pairs, from_test = buckets(args)
    os.makedirs(os.path.join(args.out, "buckets"), exist_ok=True)
    files = []
    for (name, lo, _), ps in zip(BUCKETS, pairs):
        path = os.path.join(args.out, "buckets", f"source-{lo}.tsv")
        with open(path, "w", encoding="utf-8") as f:
            for s, t in ps:
                f.write(f"{s}\t{t}\n")
        files.append(path)
    results = {}
    runs = args.schemes + ([REFERENCE] if os.path.exists(
        os.path.join(run_dir(args.out, REFERENCE), "model.safetensors")) else [])
    for scheme in runs:
        results[scheme] = []
        for path in files:
            r = evaluate(args, run_dir(args.out, scheme), path)
            b = r["bleu"]
            results[scheme].append({"bleu": b["score"], "loss": r["loss"],
                                    "length_ratio": b["sys_len"] / b["ref_len"],
                                    "pairs_without_loss": r["pairs_too_long_for_loss"]})
            print(f"{scheme:10s} {os.path.basename(path):16s} BLEU {r['bleu']['score']:6.2f} "
                  f"loss {r['loss']:.3f}", flush=True)
    header = "| scheme | " + " | ".join(f"{n} ({len(p)} pairs)".replace("<", "&lt;")
                                        for (n, _, _), p in zip(BUCKETS, pairs)) + " |"
    lines = [header, "|---" * (len(BUCKETS) + 1) + "|"]
    for scheme, rs in results.items():
        lines.append(f"| {scheme} | " + " | ".join(f"{r['bleu']:.1f} ({r['loss']:.2f})"
                                                  for r in rs) + " |")
    lines += ["", "Output length / reference length (sacreBLEU's sys_len / ref_len):", "",
              header, lines[1]]
    for scheme, rs in results.items():
        lines.append(f"| {scheme} | " + " | ".join(f"{r['length_ratio']:.2f}" for r in rs) + " |")
    table = "\n".join(lines)
    note = ("BLEU (per-token loss); test pairs per bucket: "
            + ", ".join(str(n) for n in from_test) + "; the rest dropped by the length limit")
    print("\n" + table + "\n\n" + note)
    with open(os.path.join(args.out, "extrapolation.md"), "w") as f:
        f.write(table + "\n\n" + note + "\n")
    with open(os.path.join(args.out, "extrapolation.json"), "w") as f:
        json.dump({"buckets": [n for n, _, _ in BUCKETS], "pairs": [len(p) for p in pairs],
                   "from_test": from_test, "epochs": args.epochs,
                   "max_length": args.max_length, "results": results}, f, indent=1)
    svg(results, os.path.join(args.out, "extrapolation.svg"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("step", choices=["train", "score"])
    p.add_argument("--out", default="out/extrapolation")
    p.add_argument("--attn", default="build/release/attn")
    p.add_argument("--schemes", nargs="+", default=SCHEMES, choices=SCHEMES)
    p.add_argument("--max-length", type=int, default=16)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--per-bucket", type=int, default=1000)
    p.add_argument("--corpus", default=CORPUS)
    args = p.parse_args()
    (train if args.step == "train" else score)(args)


if __name__ == "__main__":
    sys.exit(main())
