#!/usr/bin/env python3
"""The Python module against its peers, in one run:

  1. translate  attn.Translator.translate on N sentences against `attn
                translate` on the same sentences (stdin), the same model and
                threads: the seconds from the first sentence in to the last
                translation out, without loading the model (the CLI's
                --metrics-json; the Translator built before the clock
                starts); the outputs are checked equal;
  2. overhead   the per-call time of a small op from Python: attn.ops.softmax
                on a (4, 8) float32 array (NumPy in, attn.Tensor out) against
                torch.softmax on a (4, 8) tensor, in microseconds a call;
  3. attention  forward and forward + backward of attention at n = 1,024 and
                4,096 (queries = keys, `--heads` heads of `--dim`, batch 1):
                attn.ops.scaled_dot_product_attention (the fused kernel)
                against d2l's eager PyTorch formulation (torch.bmm, d2l's
                masked_softmax, torch.bmm, on the (heads, n, dim) layout).

    PYTHONPATH=build/release/python /usr/bin/python3 bench/python_bench.py \\
        --model out/tatoeba --attn build/release/attn --threads 2 [--json FILE]
    ... --quick   (tiny sizes: checks that every part runs)

Each figure is the median of --repeats runs after a warm-up; ratios are
PyTorch's time over attn's (above 1: attn is faster). Settings: both sides in
this process with --threads threads and OMP_WAIT_POLICY=PASSIVE (set before
either library starts its OpenMP runtime; PyTorch 1.13 on 2 cores is 4-5x
faster so, see bench/peer_env.py), OPENBLAS_CORETYPE as bench/peer_env.py
chooses it. Needs Debian's python3-torch for parts 2 and 3 (without it they
are skipped, with a message).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_env import describe, peer_env  # noqa: E402

os.environ.update(peer_env())  # before attn and torch start OpenMP

import numpy as np  # noqa: E402

import attn  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError:
    torch = None


def median_seconds(fn, repeats):
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_translate(args):
    with open(os.path.join(args.model, "data", "test.tsv"), encoding="utf-8") as f:
        sources = [line.split("\t")[0] for line in f.read().splitlines()]
    sources = (sources * (args.sentences // max(len(sources), 1) + 1))[:args.sentences]
    text = "".join(s + "\n" for s in sources)
    tr = attn.Translator(args.model, threads=args.threads)
    py_times, cli_times, same = [], [], True
    for _ in range(args.repeats):
        start = time.perf_counter()
        got = tr.translate(sources)
        py_times.append(time.perf_counter() - start)
        with tempfile.TemporaryDirectory() as tmp:
            metrics = os.path.join(tmp, "metrics.json")
            r = subprocess.run([args.attn, "--threads", str(args.threads), "translate", "--model",
                                args.model, "--metrics-json", metrics], input=text,
                               capture_output=True, text=True, check=True)
            with open(metrics) as f:
                cli_times.append(json.load(f)["seconds"])
        same = same and got == r.stdout.splitlines()
    py, cli = statistics.median(py_times), statistics.median(cli_times)
    return {"sentences": len(sources), "python_s": py, "cli_s": cli, "python_over_cli": py / cli,
            "same_output": same}


def bench_overhead(args):
    x = np.random.rand(4, 8).astype(np.float32)
    calls = args.calls

    def attn_calls():
        for _ in range(calls):
            attn.ops.softmax(x)

    tx = torch.from_numpy(x)

    def torch_calls():
        for _ in range(calls):
            torch.softmax(tx, -1)

    a = median_seconds(attn_calls, args.repeats) / calls * 1e6
    t = median_seconds(torch_calls, args.repeats) / calls * 1e6
    return {"op": "softmax (4, 8) float32", "attn_us": a, "torch_us": t, "torch_over_attn": t / a}


def d2l_masked_softmax(X, valid_lens):
    if valid_lens is None:
        return torch.nn.functional.softmax(X, dim=-1)
    shape = X.shape
    valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    X = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1], dtype=torch.float32)[None, :] < valid_lens[:, None]
    X[~mask] = -1e6
    return torch.nn.functional.softmax(X.reshape(shape), dim=-1)


def bench_attention(args, n):
    H, D = args.heads, args.dim
    q, k, v = (np.random.randn(H, n, D).astype(np.float32) for _ in range(3))
    lens = np.full(H, n - n // 8, np.int64)  # masked keys, as d2l's padded batches have
    g = np.random.randn(H, n, D).astype(np.float32)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    tlens, tg = torch.from_numpy(lens), torch.from_numpy(g)

    def attn_fwd():
        with attn.no_grad():
            attn.ops.scaled_dot_product_attention(q, k, v, lens)

    def attn_fwdbwd():
        aq, ak, av = (attn.Tensor(a, requires_grad=True) for a in (q, k, v))
        attn.ops.scaled_dot_product_attention(aq, ak, av, lens).backward(g)

    def d2l(q_, k_, v_):
        scores = torch.bmm(q_, k_.transpose(1, 2)) / math.sqrt(D)
        return torch.bmm(d2l_masked_softmax(scores, tlens), v_)

    def torch_fwd():
        with torch.no_grad():
            d2l(tq, tk, tv)

    def torch_fwdbwd():
        q_, k_, v_ = (t.detach().requires_grad_() for t in (tq, tk, tv))
        d2l(q_, k_, v_).backward(tg)

    r = {"n": n, "heads": H, "dim": D}
    for name, a_fn, t_fn in [("fwd", attn_fwd, torch_fwd), ("fwdbwd", attn_fwdbwd, torch_fwdbwd)]:
        a = median_seconds(a_fn, args.repeats) * 1e3
        t = median_seconds(t_fn, args.repeats) * 1e3
        r.update({f"{name}_attn_ms": a, f"{name}_torch_ms": t, f"{name}_torch_over_attn": t / a})
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a subword model directory (attn train --preset tatoeba)")
    p.add_argument("--attn", default="build/release/attn", help="the attn program")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--sentences", type=int, default=2000)
    p.add_argument("--sizes", default="1024,4096", help="attention lengths n")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--calls", type=int, default=10000, help="small-op calls per timing")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="tiny sizes: check that it all runs")
    p.add_argument("--json", help="write the figures here as JSON")
    args = p.parse_args()
    if args.quick:
        args.sentences, args.sizes, args.heads, args.dim = 20, "64,128", 2, 16
        args.calls, args.repeats = 100, 1
    attn.set_num_threads(args.threads)
    env = peer_env()
    out = {"threads": args.threads, "settings": describe(env), "attn": attn.__version__}
    if torch is not None:
        torch.set_num_threads(args.threads)
        out["torch"] = torch.__version__
    print(f"attn {attn.__version__}, {args.threads} threads; {out['settings']}")
    if args.model:
        t = out["translate"] = bench_translate(args)
        print(f"translate {t['sentences']} sentences: Translator {t['python_s']:.3f} s, "
              f"attn translate {t['cli_s']:.3f} s, ratio {t['python_over_cli']:.3f}, "
              f"same output: {t['same_output']}")
    else:
        print("translate: skipped (no --model)")
    if torch is None:
        print("overhead, attention: skipped (PyTorch is not installed: python3-torch)")
    else:
        o = out["overhead"] = bench_overhead(args)
        print(f"overhead of {o['op']}: attn {o['attn_us']:.2f} us, PyTorch {o['torch_us']:.2f} us "
              f"a call (PyTorch / attn {o['torch_over_attn']:.2f})")
        out["attention"] = []
        for n in (int(s) for s in args.sizes.split(",")):
            r = bench_attention(args, n)
            out["attention"].append(r)
            print(f"attention n={n} ({r['heads']} heads of {r['dim']}): forward attn "
                  f"{r['fwd_attn_ms']:.2f} ms, d2l PyTorch {r['fwd_torch_ms']:.2f} ms (ratio "
                  f"{r['fwd_torch_over_attn']:.2f}); forward+backward attn "
                  f"{r['fwdbwd_attn_ms']:.2f} ms, d2l PyTorch {r['fwdbwd_torch_ms']:.2f} ms "
                  f"(ratio {r['fwdbwd_torch_over_attn']:.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
