#!/usr/bin/env python3
"""Training speed at three model sizes and at d2l's: attn (f32 and bf16)
against d2l's PyTorch Transformer, run alternately on the same machine.

    python3 bench/scale_sweep.py --attn build/release/attn [--configs a,b,c]
        [--pairs 3] [--seconds 60] [--threads 2] [--precisions f32,bf16]
    python3 bench/scale_sweep.py --configs toy [--pairs 3]

The sizes (hidden, layers, heads, ffn, num_steps T, batch; 30,000 pairs of the
bundled corpus, d2l's word vocabularies and fixed-length batches):

    a   128, 2, 4, 256,  T 16, batch 128
    b   256, 3, 8, 1024, T 32, batch 64
    c   512, 6, 8, 2048, T 32, batch 32   (Transformer-base's layer sizes)

`toy` is d2l's own run instead (`attn train`'s default preset d2l: 32, 2, 4,
64, T 10, batch 64, 600 pairs, lr 0.005, 200 epochs, f32 only), not time
limited; the peer runs it on 1 and on --threads threads each round and the
faster of the two counts (one thread is often PyTorch's best at this size).
It also prints the median time of a one-sentence greedy translation.

Each round runs every side once, the order rotating from round to round;
each run trains for --seconds and reports target tokens (valid positions) per
second of training. Printed: each round's figures with the load average
before it (each attn run with its placement probes, `[far k/n]`: k of the n
probes of the run found the two cores far apart, docs/design/threads.md;
attn probes only while no other process keeps the cores busy, so n = 0
says that one did all along),
then the median of each side over the rounds, its model GFLOP/s (below) and
its ratio to the peer's median.

Model FLOP/s: the matrix products of one step, forward and backward (6 FLOP
per multiply-add of a Linear layer, at every position of the padded
(batch, T) batches of both sides, the encoder's and the decoder's; 3 x 2 per
multiply-add of the attention's scores and weighted values), times the steps
a run made, over its seconds of training (attn's include its checkpoints).
The embeddings (gathers), layer norms, softmax, loss and optimizer are not
counted. The aim for bf16 is above the CPU's f32 FMA peak (562 GFLOP/s on
2 cores of the AMD EPYC Zen 5 of docs/performance.md).

The peer runs at its best (bench/peer_env.py): OMP_WAIT_POLICY=PASSIVE (4-5x
faster than PyTorch's spinning default on 2 cores) and, on a CPU with
AVX-512, OPENBLAS_CORETYPE=SKYLAKEX (Debian's OpenBLAS otherwise picks its
Haswell kernels there); elsewhere OpenBLAS chooses. attn runs with its
defaults. A precision attn would not run here (bf16 without AVX-512 BF16:
attn warns and trains in f32) is reported and skipped; a warning of a
precision that runs (bf16 slower than f32 on this CPU) is printed beside
the results. Nothing else may run
meanwhile.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peer_env import describe, peer_env  # noqa: E402
from run_record import record, row, span, torch_version  # noqa: E402
ROOT = os.path.dirname(HERE)

CONFIGS = {
    "a": dict(num_hiddens=128, num_layers=2, num_heads=4, ffn_num_hiddens=256, num_steps=16,
              batch_size=128),
    "b": dict(num_hiddens=256, num_layers=3, num_heads=8, ffn_num_hiddens=1024, num_steps=32,
              batch_size=64),
    "c": dict(num_hiddens=512, num_layers=6, num_heads=8, ffn_num_hiddens=2048, num_steps=32,
              batch_size=32),
}


def model_flops_per_step(cfg, tgt_vocab):
    """Matrix-product FLOP of one training step (forward + backward)."""
    h, f, layers = cfg["num_hiddens"], cfg["ffn_num_hiddens"], cfg["num_layers"]
    positions = cfg["batch_size"] * cfg["num_steps"]
    encoder = 4 * h * h + 2 * h * f  # W_q, W_k, W_v, W_o; the FFN
    decoder = 8 * h * h + 2 * h * f  # self- and cross-attention; the FFN
    linear_macs = positions * (layers * (encoder + decoder) + h * tgt_vocab)
    # scores and weighted values of 3 attentions per layer pair, each T x T
    attention_macs = layers * 3 * 2 * cfg["batch_size"] * cfg["num_steps"] ** 2 * h
    return 6 * (linear_macs + attention_macs)


def flags(cfg):
    out = []
    for k, v in cfg.items():
        out += ["--" + k.replace("_", "-"), str(v)]
    return out


def placement(m):
    """attn's placement probes of a run (attn/core/threads.h): how many of
    them found the two cores far apart, where attn runs its small ops on
    one thread and d2l's toy training is about a third slower."""
    if "placement_probes" not in m:
        return ""
    return f" [far {m['placement_far_probes']}/{m['placement_probes']}]"


def run_toy_attn(a, work):
    metrics = os.path.join(work, "attn.json")
    cmd = [a.attn, "--threads", str(a.threads), "train", "--out", os.path.join(work, "model"),
           "--overwrite", "--quiet", "--metrics-json", metrics]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(metrics) as f:
        m = json.load(f)
    return m["tokens_per_s"], m["translate_ms"], placement(m)


def run_toy_peer(a, threads):
    env = peer_env()
    cmd = [a.python, os.path.join(HERE, "peers", "d2l_transformer.py"), "--json", "--threads",
           str(threads), "--epochs", "200"]
    out = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True).stdout
    m = json.loads(out.strip().splitlines()[-1])
    return m["tokens_per_s"], m["translate_ms"], ""


def toy_rounds(a, work):
    """d2l's run: attn against the faster of PyTorch on 1 and on a.threads threads."""
    sides = ["attn", "pytorch 1", f"pytorch {a.threads}"]
    got = {s: [] for s in sides}
    ms = {s: [] for s in sides}
    where = {s: "" for s in sides}
    ratios, ms_ratios = [], []
    for r in range(a.pairs):
        load = os.getloadavg()[0]
        for side in sides[r % 3:] + sides[:r % 3]:
            v, t, where[side] = run_toy_attn(a, work) if side == "attn" else run_toy_peer(
                a, int(side.split()[1]))
            got[side].append(v)
            ms[side].append(t)
        best = max(got[s][-1] for s in sides[1:])
        fastest = min(ms[s][-1] for s in sides[1:])
        ratios.append(got["attn"][-1] / best)
        ms_ratios.append(fastest / ms["attn"][-1])
        print(f"toy round {r + 1} (load {load:.2f}): " +
              ", ".join(f"{s} {got[s][-1]:.0f} tokens/s {ms[s][-1]:.2f} ms{where[s]}"
                        for s in sides) +
              f"; {ratios[-1]:.2f}x training, {ms_ratios[-1]:.2f}x one sentence", flush=True)
    print(f"toy: training {statistics.median(ratios):.2f}x (rounds " +
          ", ".join(f"{x:.2f}" for x in ratios) + "), one sentence " +
          f"{statistics.median(ms_ratios):.2f}x (rounds " +
          ", ".join(f"{x:.2f}" for x in ms_ratios) + ")", flush=True)
    return {"tokens_per_s": got, "translate_ms": ms, "ratios": ratios, "ms_ratios": ms_ratios}


def run_attn(a, cfg, precision, work):
    metrics = os.path.join(work, "attn.json")
    cmd = [a.attn, "--threads", str(a.threads), "train", "--data", a.data, "--num-examples",
           str(a.num_examples), "--lr", str(a.lr), "--epochs", "1000", "--time-limit",
           str(a.seconds / 60.0), "--precision", precision, "--out", os.path.join(work, "model"),
           "--overwrite", "--quiet", "--metrics-json", metrics] + flags(cfg)
    # The precision's warning was printed once by precision_probe; anything
    # else attn says goes through.
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in r.stderr.splitlines():
        if "warning: --precision" not in line:
            print(line, file=sys.stderr, flush=True)
    r.check_returncode()
    with open(metrics) as f:
        m = json.load(f)
    with open(os.path.join(work, "model", "config.json")) as f:
        vocab = json.load(f)["tgt_vocab_size"]
    gflops = m["steps"] * model_flops_per_step(cfg, vocab) / m["train_seconds"] / 1e9
    return m["tokens_per_s"], gflops, m["step_losses"], placement(m)


def precision_probe(a, precision, work):
    """Whether attn trains in `precision` here (bf16 falls back to f32 on a
    CPU without AVX-512 BF16), read from a tiny run's training.json, and
    what it warned ("" if nothing; it also warns where bf16 runs but is
    slower than f32)."""
    cmd = [a.attn, "--threads", "1", "train", "--data", a.data, "--num-examples", "64",
           "--epochs", "1", "--precision", precision, "--out", os.path.join(work, "probe"),
           "--overwrite", "--quiet"]
    r = subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    with open(os.path.join(work, "probe", "training.json")) as f:
        ran = json.load(f)["precision"] == precision
    return ran, " ".join(line for line in r.stderr.splitlines() if "warning" in line)


def run_peer(a, cfg):
    env = peer_env()
    cmd = [a.python, os.path.join(HERE, "peers", "d2l_transformer.py"), "--json",
           "--data", a.data, "--threads", str(a.threads), "--num-examples", str(a.num_examples),
           "--lr", str(a.lr), "--epochs", "1000", "--max-seconds", str(a.seconds),
           "--translate-reps", "1"] + flags(cfg)
    out = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True).stdout
    m = json.loads(out.strip().splitlines()[-1])
    gflops = m["steps"] * model_flops_per_step(cfg, m["tgt_vocab_size"]) / m["train_seconds"] / 1e9
    return m["tokens_per_s"], gflops, None, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attn", default=os.path.join(ROOT, "build", "release", "attn"))
    ap.add_argument("--data", default=os.path.join(ROOT, "datasets", "fra-eng", "fra.txt.gz"))
    ap.add_argument("--configs", default="a,b,c")
    ap.add_argument("--precisions", default="f32,bf16")
    ap.add_argument("--pairs", type=int, default=3, help="rounds (each side once per round)")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--num-examples", type=int, default=30000)
    ap.add_argument("--lr", type=float, default=0.0005)
    ap.add_argument("--json", metavar="FILE",
                    help="also write the run here, in bench/results' format (bench/figures.py)")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="the Python with Debian's python3-torch")
    a = ap.parse_args()
    for name in a.configs.split(","):
        if name != "toy" and name not in CONFIGS:
            ap.error(f"unknown config {name!r}: choose from a, b, c, toy")
    print(f"peer: PyTorch (bench/peers/d2l_transformer.py), {describe(peer_env())}; "
          f"attn: --threads {a.threads}, its defaults", flush=True)
    results = {}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as work:
        sides = []
        sized = any(name != "toy" for name in a.configs.split(","))
        for p in a.precisions.split(",") if sized else []:
            ran, warning = precision_probe(a, p, work) if p != "f32" else (True, "")
            if not ran:
                print(f"attn {p}: skipped, it would not run in {p} here: {warning}", flush=True)
                continue
            if warning:
                print(f"attn {p}: note: it warns: {warning}", flush=True)
            sides.append("attn " + p)
        sides.append("pytorch")
        for name in a.configs.split(","):
            if name == "toy":
                results[name] = toy_rounds(a, work)
                continue
            cfg = CONFIGS[name]
            got = {s: [] for s in sides}
            flops = {s: [] for s in sides}
            losses = {s: [] for s in sides}
            where = {s: "" for s in sides}
            for r in range(a.pairs):
                load = os.getloadavg()[0]
                order = sides[r % len(sides):] + sides[:r % len(sides)]
                for side in order:
                    v, g, curve, where[side] = run_peer(a, cfg) if side == "pytorch" else \
                        run_attn(a, cfg, side.split()[1], work)
                    got[side].append(v)
                    flops[side].append(g)
                    losses[side].append(curve)
                print(f"config {name} round {r + 1} (load {load:.2f}): " +
                      ", ".join(f"{s} {got[s][-1]:.0f}{where[s]}" for s in sides), flush=True)
            med = {s: statistics.median(v) for s, v in got.items()}
            med_flops = {s: statistics.median(v) for s, v in flops.items()}
            for s in sides:
                print(f"config {name}: {s} median {med[s]:.0f} tokens/s, "
                      f"{med_flops[s]:.0f} model GFLOP/s" +
                      (f", {med[s] / med['pytorch']:.2f}x pytorch" if s != "pytorch" else ""),
                      flush=True)
            results[name] = {"config": cfg, "tokens_per_s": got, "median": med,
                             "model_gflops": flops, "median_gflops": med_flops}
            # The same seed and data, so the same batches: each attn
            # precision's step losses (its first run) over the steps all of
            # them reached, the mean of the last fifth of those steps.
            curves = {s: losses[s][0] for s in sides if s != "pytorch"}
            if len(curves) > 1:
                n = min(len(c) for c in curves.values())
                k = max(1, n // 5)
                print(f"config {name}: mean step loss over steps {n - k + 1}-{n}: " +
                      ", ".join(f"{s} {sum(c[n - k:n]) / k:.4f}" for s, c in curves.items()),
                      flush=True)
                results[name]["loss_tail"] = {s: sum(c[n - k:n]) / k for s, c in curves.items()}
    if a.json:
        with open(a.json, "w") as f:
            settings = describe(peer_env()) + (
                f"; for d2l's run its best of 1 and {a.threads} threads per round"
                if "toy" in results else "")
            json.dump(record(a.attn, a.threads,
                             f"PyTorch {torch_version(a.python)} (bench/peers/d2l_transformer.py)",
                             settings, figure_rows(a, results),
                             load=f"{load_before:.1f}-{os.getloadavg()[0]:.1f}",
                             note=f"`bench/scale_sweep.py --configs {a.configs} --pairs {a.pairs}"
                             f" --seconds {a.seconds:g}`", seconds=a.seconds,
                             results=results), f, indent=1)
            f.write("\n")


def figure_rows(a, results):
    """The rows bench/figures.py shows: d2l's run (its best PyTorch per
    round), and each size and precision (the ratio of the medians, the
    rounds' own ratios beside it)."""
    rows = []
    for name, r in results.items():
        if name == "toy":
            got, ms = r["tokens_per_s"], r["translate_ms"]
            peers = [s for s in got if s != "attn"]
            rows.append(row("train-d2l",
                            "d2l's Transformer, training (`--preset d2l`), target tokens/s",
                            span(got["attn"], "{:,.0f}"),
                            span([max(x) for x in zip(*(got[s] for s in peers))], "{:,.0f}"),
                            statistics.median(r["ratios"]), r["ratios"]))
            rows.append(row("translate-d2l-one",
                            "the same model, greedy translation of one sentence",
                            span(ms["attn"], "{:.2f}") + " ms",
                            span([min(x) for x in zip(*(ms[s] for s in peers))], "{:.2f}") + " ms",
                            statistics.median(r["ms_ratios"]), r["ms_ratios"]))
            continue
        c = r["config"]
        for side, med in r["median"].items():
            if side == "pytorch":
                continue
            precision = side.split()[1]
            rounds = [x / p for x, p in zip(r["tokens_per_s"][side], r["tokens_per_s"]["pytorch"])]
            rows.append(row(f"train-{name}-{precision}",
                            f"size {name} training (hidden {c['num_hiddens']}, {c['num_layers']} "
                            f"layers, T {c['num_steps']}, batch {c['batch_size']}), {precision}, "
                            "target tokens/s",
                            f"{med:,.0f}", f"{r['median']['pytorch']:,.0f}",
                            med / r["median"]["pytorch"], rounds))
    return rows


if __name__ == "__main__":
    main()
