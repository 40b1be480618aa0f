#!/usr/bin/env python3
"""attn against PyTorch with a KV cache on the same subword model: batch
translation of 2,000 sentences, greedy and beam 4, side by side.

    ./build/release/attn train --preset tatoeba --out out/tatoeba
    python3 bench/translate_batch.py --model out/tatoeba --threads 2 --pairs 3 \\
        [--attn-variants f32,bf16,int8] [--beams 1,4] [--json out/translate_batch.json]

The sentences are the English side of the first --sentences pairs of
MODEL/data/test.tsv (or --input FILE, one per line). For each decoding
(--beams: 1 is greedy; others beam search with attn's length penalty for
subword models, 0.6), each round runs `attn translate` once per variant
(--attn-variants: f32 = --quantize none; bf16 = --precision bf16
--quantize none; int8 = --quantize int8;
a+b combines them; +avx2 runs that variant with ATTN_ISA=avx2, attn's
kernels as on a CPU without AVX-512, e.g. int8+avx2 on AVX-VNNI's or
AVX2's int8 kernel; with --as-avx2, which takes VNNI away, int8+avxvnni
runs int8 on AVX-VNNI where the CPU has it) and bench/peers/translate_peer.py (PyTorch, the same
decoding rules, chunks, batches and KV cache) in two ways, each in fresh
processes, the order rotating from round to round:

  - "PyTorch threads": one process, torch.set_num_threads(N);
  - "PyTorch processes": N processes of one thread each, side by side, each
    translating every N-th sentence (attn's --inter-threads runs its batches
    side by side in the same way; a user of PyTorch would split the input
    between processes). Its time is the slowest process's.

Each side reports the seconds from the first sentence in to the last
translation out, without start-up and model loading (attn's --metrics-json,
the peer's --json); the whole commands' wall times are printed too. Prints
each side's median seconds and sentences/s, each round's ratio against the
faster of the two PyTorch runs of that round (PyTorch at its best) and
their median, the ratios against each way, how many translations equal
PyTorch's (threads), the settings of both sides, the CPU model, the date,
attn's commit and kernels (its --version: attention, bf16 and int8
products, in each variant's environment) and the load average before and
after. A variant the attn binary does not offer (a flag missing from `attn
translate --help`, or a probe run that fails) is reported and skipped.

Settings: attn `--threads N` (its default OpenMP settings, or
OMP_WAIT_POLICY=PASSIVE with --attn-passive; its default --inter-threads);
the peer OMP_WAIT_POLICY=PASSIVE and, on a CPU with AVX-512,
OPENBLAS_CORETYPE=SKYLAKEX (Debian's OpenBLAS otherwise takes its Haswell
kernels), glibc's malloc keeping freed memory (the peer's default). Needs
Debian's python3-torch and python3-sentencepiece.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_translate import ROOT, load_average, timed  # noqa: E402
from peer_env import describe, peer_env  # noqa: E402
from run_record import cpu_model as record_cpu, record, row as figure_row, span  # noqa: E402

VARIANT_FLAGS = {"f32": [], "bf16": ["--precision", "bf16"], "int8": ["--quantize", "int8"]}
# Parts that set attn's environment instead of a flag: avx2 caps attn's
# kernels at AVX2; avxvnni lets int8 run on AVX-VNNI again under --as-avx2
# (which takes VNNI away), as on Intel's cores since Alder Lake.
VARIANT_ENV = {"avx2": {"ATTN_ISA": "avx2"}, "avxvnni": {"ATTN_NO_VNNI": "0"}}


def variant_flags(name):
    """The attn flags and environment of a variant: f32, bf16, int8, or
    several joined by + (avx2 among them: ATTN_ISA=avx2; avxvnni:
    ATTN_NO_VNNI=0, e.g. int8+avxvnni with --as-avx2). A variant without
    int8 says --quantize none: attn decodes a subword model in int8 by
    default where the CPU runs it."""
    flags, env = [], {}
    for part in name.split("+"):
        if part in VARIANT_ENV:
            env.update(VARIANT_ENV[part])
        elif part in VARIANT_FLAGS:
            flags += VARIANT_FLAGS[part]
        else:
            sys.exit(f"translate_batch: unknown attn variant '{part}' (known: "
                     f"{', '.join(list(VARIANT_FLAGS) + list(VARIANT_ENV))}, or several "
                     f"joined by +)")
    if "--quantize" not in flags:
        flags += ["--quantize", "none"]
    return flags, env


def cpu_model():
    """The CPU's model name (/proc/cpuinfo), or '?'."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def attn_kernels(attn, env):
    """attn --version's first line and its lines on the kernels (attention,
    bf16 and int8 products), in `env`."""
    r = subprocess.run([attn, "--version"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return []
    lines = r.stdout.split("\n")
    keep = ("attention kernels:", "bf16 products:", "int8 products:")
    return [lines[0]] + [x for x in lines if x.startswith(keep)]


def probe_variant(a, name, flags, env):
    """None if attn can run the variant, else why not; and any warning it
    prints (e.g. bf16 falling back to f32 on a CPU without AVX-512 BF16)."""
    help_text = subprocess.run([a.attn, "translate", "--help"], capture_output=True,
                               text=True).stdout
    for f in flags:
        if f.startswith("--") and f not in help_text:
            return f"this attn binary has no {f} (attn translate --help)", ""
    r = subprocess.run([a.attn, "--threads", "1", "translate", "--model", a.model, *flags,
                        "I'm home."], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return f"attn translate {' '.join(flags)} exited {r.returncode}: {r.stderr.strip()}", ""
    return None, r.stderr.strip()


def run_peer(a, K, inputs, threads, work, env):
    """The peer on each of `inputs` at once (one process each, `threads`
    threads): (the slowest process's seconds, the wall time of all, the
    translations in the input's order, the last process's JSON)."""
    procs = []
    t0 = time.perf_counter()
    for i, path in enumerate(inputs):
        out = os.path.join(work, f"peer{i}.txt")
        cmd = [a.python, os.path.join(ROOT, "bench", "peers", "translate_peer.py"),
               "--model", a.model, "--input", path, "--threads", str(threads),
               "--beam-size", str(K), "--output", out, "--json", *a.peer_args.split()]
        procs.append((cmd, out, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, env=env)))
    infos, outputs = [], []
    for cmd, out, p in procs:
        stdout, stderr = p.communicate()
        if p.returncode != 0:
            sys.exit(f"translate_batch: {' '.join(cmd)} exited {p.returncode}: "
                     f"{stderr.decode(errors='replace').strip()}")
        infos.append(json.loads(stdout.decode().split("\n")[:-1][-1]))
        with open(out, encoding="utf-8") as f:
            outputs.append(f.read().split("\n")[:-1])
    wall = time.perf_counter() - t0
    lines = [None] * sum(len(o) for o in outputs)
    for i, o in enumerate(outputs):  # share i holds sentences i, i + N, ...
        lines[i::len(outputs)] = o
    return max(x["seconds"] for x in infos), wall, lines, infos[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attn", default=os.path.join(ROOT, "build/release/attn"))
    p.add_argument("--model", required=True,
                   help="a subword model directory (attn train --preset tatoeba --out)")
    p.add_argument("--input", help="sentences, one per line (default: MODEL/data/test.tsv)")
    p.add_argument("--sentences", type=int, default=2000,
                   help="how many sentences (default 2000; all of --input if 0)")
    p.add_argument("--pairs", type=int, default=3, help="rounds: alternating runs of each side")
    p.add_argument("--threads", type=int, default=2,
                   help="attn --threads and the peer's torch.set_num_threads")
    p.add_argument("--beams", default="1,4", help="beam sizes to run, 1 = greedy (default 1,4)")
    p.add_argument("--attn-variants", default="f32",
                   help="comma-separated: f32, bf16 (--precision bf16), int8 (--quantize int8), "
                   "or several joined by + (default f32); +avx2: with ATTN_ISA=avx2 (attn's "
                   "AVX2 kernels, int8's included, on a CPU with AVX-512); +avxvnni: with "
                   "ATTN_NO_VNNI=0 (int8 on AVX-VNNI under --as-avx2, where the CPU has it)")
    p.add_argument("--as-avx2", action="store_true",
                   help="both sides as on a CPU without AVX-512, on one that has it: attn with "
                   "ATTN_ISA=avx2, ATTN_NO_VNNI=1 (AVX2's int8 kernel, not AVX-VNNI's) and "
                   "ONEDNN_MAX_CPU_ISA=AVX2, the peer on OpenBLAS's Haswell, "
                   "PyTorch's and oneDNN's AVX2 kernels (bench/peer_env.py)")
    p.add_argument("--attn-passive", action="store_true",
                   help="run attn with OMP_WAIT_POLICY=PASSIVE (default: its own settings)")
    p.add_argument("--python", default="/usr/bin/python3", help="the peer's interpreter")
    p.add_argument("--peer-args", default="",
                   help="extra arguments for translate_peer.py (e.g. '--malloc default')")
    p.add_argument("--json", metavar="FILE",
                   help="write the run here as JSON, in bench/results' format (bench/figures.py)")
    a = p.parse_args()

    work = tempfile.mkdtemp(prefix="attn_translate_bench_")
    src = os.path.join(work, "sentences.txt")
    if a.input:
        with open(a.input, encoding="utf-8") as f:
            sentences = [line.rstrip("\n") for line in f]
    else:
        with open(os.path.join(a.model, "data", "test.tsv"), encoding="utf-8") as f:
            sentences = [line.split("\t", 1)[0] for line in f.read().split("\n") if line]
    if a.sentences > 0:
        sentences = sentences[:a.sentences]
    with open(src, "w", encoding="utf-8") as f:
        f.writelines(s + "\n" for s in sentences)
    n = len(sentences)
    # The processes' shares: every a.threads-th sentence, so that each gets
    # sentences of every length.
    shares = []
    for i in range(a.threads):
        share = os.path.join(work, f"share{i}.txt")
        with open(share, "w", encoding="utf-8") as f:
            f.writelines(s + "\n" for s in sentences[i::a.threads])
        shares.append(share)

    attn_env = dict(os.environ)
    attn_env.pop("OMP_WAIT_POLICY", None)
    if a.attn_passive:
        attn_env["OMP_WAIT_POLICY"] = "PASSIVE"
    if a.as_avx2:
        attn_env.update(ATTN_ISA="avx2", ATTN_NO_VNNI="1", ONEDNN_MAX_CPU_ISA="AVX2")
    peer_settings = peer_env(isa="avx2" if a.as_avx2 else None)

    variants, skipped, envs, kernels = [], {}, {}, {}
    for name in [v for v in a.attn_variants.split(",") if v]:
        flags, extra = variant_flags(name)
        envs[name] = {**attn_env, **extra}
        why, warning = probe_variant(a, name, flags, envs[name])
        if why:
            print(f"attn {name}: skipped: {why}", flush=True)
            skipped[name] = why
            continue
        if warning:
            print(f"attn {name}: note: it prints: {warning}", flush=True)
        kernels[name] = attn_kernels(a.attn, envs[name])
        variants.append((name, flags, warning))
    if not variants:
        sys.exit("translate_batch: no attn variant to run")
    beams = [int(b) for b in a.beams.split(",") if b]

    load_before = load_average()
    results = []
    peer_info = None
    for K in beams:
        what = "greedy" if K == 1 else f"beam {K}"
        peers = ["PyTorch threads", "PyTorch processes"]
        sides = [("attn " + name, flags) for name, flags, _ in variants] + [(p, None) for p in peers]
        runs = {side: [] for side, _ in sides}  # (seconds, wall, lines)
        for r in range(a.pairs):
            order = sides[r % len(sides):] + sides[:r % len(sides)]
            for side, flags in order:
                if side == "PyTorch threads":
                    seconds, wall, lines, peer_info = run_peer(a, K, [src], a.threads, work,
                                                               peer_settings)
                elif side == "PyTorch processes":
                    seconds, wall, lines, _ = run_peer(a, K, shares, 1, work, peer_settings)
                else:
                    metrics = os.path.join(work, "attn.json")
                    cmd = [a.attn, "--threads", str(a.threads), "translate", "--model", a.model,
                           "--beam-size", str(K), *flags, "--metrics-json", metrics]
                    lines, wall = timed(cmd, src, envs[side[len("attn "):]])
                    with open(metrics) as f:
                        seconds = json.load(f)["seconds"]
                runs[side].append((seconds, wall, lines))
            last = {side: runs[side][-1][0] for side, _ in sides}
            best = min(last[p] for p in peers)
            times = ", ".join(f"{side} {s:.3f} s" for side, s in last.items())
            ratios = ", ".join(f"{side} {best / s:.2f}x"
                               for side, s in last.items() if side not in peers)
            print(f"{what}, round {r + 1}: {times}; PyTorch's best time over {ratios}", flush=True)
        peer_lines = runs["PyTorch threads"][-1][2]
        for side, flags in sides:
            secs = [x[0] for x in runs[side]]
            row = {"decoding": what, "beam_size": K, "side": side,
                   "seconds": statistics.median(secs), "runs_seconds": secs,
                   "wall_seconds": statistics.median(x[1] for x in runs[side]),
                   "sentences_per_s": n / statistics.median(secs)}
            lines = runs[side][-1][2]
            row.update(equal_to_peer=sum(x == y for x, y in zip(lines, peer_lines)),
                       lines=len(lines))
            if flags is not None:
                bests = [min(t, p) for t, p in zip(*(
                    [x[0] for x in runs[q]] for q in peers))]
                ratios = [b / s[0] for b, s in zip(bests, runs[side])]
                row.update(ratio=statistics.median(ratios), ratios=ratios, flags=flags,
                           ratio_threads=statistics.median(
                               p[0] / s[0] for p, s in zip(runs[peers[0]], runs[side])),
                           ratio_processes=statistics.median(
                               p[0] / s[0] for p, s in zip(runs[peers[1]], runs[side])))
            results.append(row)
    load_after = load_average()

    torch_version = peer_info["torch"] if peer_info else "?"
    print(f"\n{n} sentences ({a.input or os.path.join(a.model, 'data', 'test.tsv')}), read as "
          f"attn translate reads stdin (chunks of 1024, by length; attn's batches: its "
          f"--max-batch-size, by default 32 sentences, or 64 rows in bf16 and int8; the peer's: its --batch-size, 128 by default); medians "
          f"of {a.pairs} rounds, the order rotating; load average before {load_before}, "
          f"after {load_after}")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "?"
    print(f"CPU: {cpu_model()}; {time.strftime('%Y-%m-%d')}; attn commit {commit}")
    for name, _, _ in variants:
        extra = {k: v for k, v in envs[name].items() if attn_env.get(k) != v}
        print(f"attn {name}" + (f" ({' '.join(f'{k}={v}' for k, v in extra.items())})"
                                if extra else "") + ": " + "; ".join(kernels[name]))
    print(f"attn: --threads {a.threads}, "
          f"{'OMP_WAIT_POLICY=PASSIVE' if a.attn_passive else 'its default OpenMP settings'}; "
          + "; ".join(f"{name}: {' '.join(flags) or 'no flag'}"
                      + (f" (it warned: {w})" if w else "") for name, flags, w in variants))
    print(f"PyTorch {torch_version} (bench/peers/translate_peer.py): threads: one process, "
          f"torch.set_num_threads({a.threads}); processes: {a.threads} processes of one thread, "
          f"every {a.threads}th sentence each; {describe(peer_settings)}"
          + (", glibc malloc keeping freed memory" if peer_info and peer_info.get("malloc_tuned")
             else "") + (f", {a.peer_args}" if a.peer_args else ""))
    print("| decoding | side | seconds (sentences/s) | PyTorch's best time / this side's (rounds) "
          "| against threads / processes | whole command, s | translations equal to PyTorch "
          "threads' |")
    print("|---|---|---|---|---|---|---|")
    for row in results:
        ratio = (f"{row['ratio']:.2f}x ({', '.join(f'{x:.2f}' for x in row['ratios'])})"
                 if "ratio" in row else "")
        each = (f"{row['ratio_threads']:.2f}x / {row['ratio_processes']:.2f}x"
                if "ratio" in row else "")
        equal = f"{row['equal_to_peer']} of {row['lines']}"
        print(f"| {row['decoding']} | {row['side']} | {row['seconds']:.3f} "
              f"({row['sentences_per_s']:,.0f}) | {ratio} | {each} | {row['wall_seconds']:.3f} "
              f"| {equal} |")
    if a.json:
        # One row per attn variant and decoding: its median seconds, PyTorch's
        # best time per round, the median of the rounds' ratios.
        figures = []
        for r in results:
            if "ratio" not in r:
                continue
            name = r["side"][len("attn "):]
            peers = [x for x in results if x["beam_size"] == r["beam_size"] and "ratio" not in x]
            best = [min(ts) for ts in zip(*(x["runs_seconds"] for x in peers))]
            key = "greedy" if r["beam_size"] == 1 else f"beam{r['beam_size']}"
            figures.append(figure_row(
                f"translate-{key}-{name}",
                f"batch translation, {n:,} {'' if a.input else 'test '}sentences, "
                f"{r['decoding']}, {name}",
                f"{r['seconds']:.3f} s", span(best, "{:.2f}") + " s", r["ratio"], r["ratios"]))
        settings = describe(peer_settings) + (
            ", glibc malloc keeping freed memory" if peer_info and peer_info.get("malloc_tuned")
            else "") + (f", {a.peer_args}" if a.peer_args else "") + (
            f"; its best per round of one process of {a.threads} threads and {a.threads} "
            "processes of one thread")
        run = record(a.attn, a.threads, f"PyTorch {torch_version} (bench/peers/translate_peer.py)",
                     settings, figures,
                     load=f"{load_before.split()[0]}-{load_after.split()[0]}",
                     note=f"`bench/translate_batch.py --pairs {a.pairs}"
                          f"{' --as-avx2' if a.as_avx2 else ''}`" + (
                              ": both sides forced to AVX2 kernels on an AVX-512 CPU"
                              if a.as_avx2 else ""),
                     sentences=n, pairs=a.pairs, attn_passive=a.attn_passive, peer_info=peer_info,
                     as_avx2=a.as_avx2,
                     # Forced to AVX2: the AVX2 table's, with the CPU saying so.
                     **({"cpu_kind": "avx2", "cpu": f"{record_cpu()}, AVX2 forced"}
                        if a.as_avx2 else {}),
                     variants={name: {"flags": flags, "warning": w,
                                      "env": {k: v for k, v in envs[name].items()
                                              if attn_env.get(k) != v},
                                      "kernels": kernels[name]}
                               for name, flags, w in variants},
                     skipped=skipped, results=results)
        with open(a.json, "w") as f:
            json.dump(run, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
