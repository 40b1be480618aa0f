#!/usr/bin/env python3
"""The ordered sum of the gradients against MPI_Allreduce in training:
`mpirun -np N attn --threads 1 train` on a slice of the tatoeba recipe,
`--reduce ordered` (the default: rank order, the bits of one process with
--accum-steps N) and `--reduce fast` (MPI_Allreduce) in alternating pairs;
target tokens per second and process 0's time in the sum, medians and the
pairs' ratios.

    python3 bench/mpi_reduce.py [--attn build/release/attn] [--np 2] [--pairs 5]
                                [--num-examples 6000] [--json FILE]

Run it on a quiet machine (no build beside it): the two sides share its cores.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_record  # noqa: E402


def train(args, reduce, work):
    out = os.path.join(work, reduce)
    metrics = out + ".json"
    cmd = ["mpirun", "-np", str(args.np), "--oversubscribe", "--bind-to", "none", args.attn,
           "--threads", "1", "train", "--preset", "tatoeba", "--data", args.data,
           "--num-examples", str(args.num_examples), "--vocab-size", "3000", "--valid-size", "0",
           "--test-size", "0", "--valid-freq", "0", "--epochs", "1", "--time-limit", "0",
           "--checkpoint-every", "0", "--quiet", "--overwrite", "--reduce", reduce,
           "--out", out, "--metrics-json", metrics]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(metrics) as f:
        m = json.load(f)
    return m["tokens_per_s"], m["allreduce_seconds"], m["train_seconds"]


def main():
    root = run_record.ROOT
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attn", default=os.path.join(root, "build/release/attn"))
    ap.add_argument("--data", default=os.path.join(root, "datasets/fra-eng/fra.txt.gz"))
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--num-examples", type=int, default=6000)
    ap.add_argument("--json", help="write the record here")
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    runs = {"ordered": [], "fast": []}
    with tempfile.TemporaryDirectory() as work:
        for _ in range(args.pairs):
            for reduce in ("ordered", "fast"):
                runs[reduce].append(train(args, reduce, work))
    ratios = [o[0] / f[0] for o, f in zip(runs["ordered"], runs["fast"])]
    for reduce, rs in runs.items():
        print(f"{reduce:8} target tokens/s median {statistics.median(r[0] for r in rs):8.0f} "
              f"({', '.join(f'{r[0]:.0f}' for r in rs)}); in the sum "
              f"{statistics.median(r[1] for r in rs):.2f} s of "
              f"{statistics.median(r[2] for r in rs):.1f} s")
    print(f"ordered / fast throughput, pair by pair: {', '.join(f'{r:.3f}' for r in ratios)}; "
          f"median {statistics.median(ratios):.3f}")
    if args.json:
        rec = run_record.record(
            args.attn, 1, "MPI_Allreduce", f"attn train --reduce fast, {args.np} processes",
            [run_record.row("train_reduce", f"tatoeba recipe, {args.num_examples} pairs",
                            statistics.median(r[0] for r in runs["ordered"]),
                            statistics.median(r[0] for r in runs["fast"]),
                            statistics.median(ratios), ratios)],
            load=[round(load0, 2), round(os.getloadavg()[0], 2)])
        with open(args.json, "w") as f:
            json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
