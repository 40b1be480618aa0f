#!/usr/bin/env python3
"""Where data parallelism alone stops scaling: a cost model of `mpirun -np N
attn train` for three model sizes on two networks.

Per optimizer step, every process computes its share of the global batch and
then the gradients are summed by an allreduce. A ring allreduce (what MPI
libraries use for large messages) sends and receives, per process,

    bytes = 2 (N - 1) / N * parameters * 4        (fp32 gradients)

in 2 (N - 1) rounds, so it takes about

    t_comm = bytes / bandwidth + 2 (N - 1) * latency

whatever N is (bandwidth term), while the compute per process shrinks as 1/N
when the global batch stays fixed (strong scaling: attn's --batch-tokens means
the same for every N). Overlapping the allreduce with the backward pass
(buckets started as their gradients are ready) can hide it behind at most the
backward's share of the step (about 2/3 of the compute).

The compute times are given on the command line or taken from the defaults
below (one process on 2 cores of an AMD EPYC Zen 5, --threads 2); the model
assumes each of the N processes computes as fast as the one measured.

    python3 bench/mpi_scaling.py [--d2l-step S] [--tatoeba-step S] [--base-step S]
"""
import argparse

GBIT = 1e9 / 8  # bytes per second in one Gbit/s


def ring_seconds(n, params, bandwidth, latency):
    if n == 1:
        return 0.0
    return 2 * (n - 1) / n * params * 4 / bandwidth + 2 * (n - 1) * latency


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # Measured on 2 cores of an AMD EPYC Zen 5, one process, --threads 2
    # (docs/design/data-parallel.md).
    ap.add_argument("--d2l-step", type=float, default=0.0058,
                    help="seconds per step of the d2l preset (default: measured here)")
    ap.add_argument("--tatoeba-step", type=float, default=0.616,
                    help="seconds per step of the tatoeba preset (default: measured here)")
    ap.add_argument("--base-step", type=float, default=2.55,
                    help="seconds per step of a Transformer-base (512 wide, 6 + 6 layers, 8 heads, "
                         "ffn 2048, vocabulary 8000) with the tatoeba recipe (default: measured here)")
    ap.add_argument("--d2l-params", type=int, default=60_937)
    ap.add_argument("--tatoeba-params", type=int, default=11_672_384)
    ap.add_argument("--base-params", type=int, default=56_397_632)
    args = ap.parse_args()
    models = [
        ("d2l (10.7)", args.d2l_params, args.d2l_step),
        ("tatoeba preset", args.tatoeba_params, args.tatoeba_step),
        ("Transformer-base", args.base_params, args.base_step),
    ]
    networks = [("25 Gbit/s Ethernet", 25 * GBIT, 25e-6), ("200 Gbit/s InfiniBand", 200 * GBIT, 2e-6)]
    header = f"{'model':<18} {'params':>11} {'step (1 proc)':>13} {'network':<22}" + "".join(
        f"{'N=' + str(n):>16}" for n in (2, 8, 64, 512))

    def table(compute_of):
        """One row per model and network; compute_of(step, n): one process's compute."""
        print(header)
        print("-" * len(header))
        for name, params, step in models:
            for net, bw, lat in networks:
                cells = []
                for n in (2, 8, 64, 512):
                    compute = compute_of(step, n)
                    comm = ring_seconds(n, params, bw, lat)
                    exposed = max(0.0, comm - 2 / 3 * compute)
                    cells.append(f"{100 * comm / (compute + comm):5.0f}% / "
                                 f"{100 * exposed / (compute + exposed):3.0f}%")
                print(f"{name:<18} {params:>11,} {step:>12.3f}s {net:<22}" +
                      "".join(f"{c:>16}" for c in cells))
        print()

    print("Fraction of a step spent in the gradients' allreduce (fp32, ring), fixed global batch:")
    print("no overlap / with the allreduce hidden behind the backward pass where it fits")
    print()
    table(lambda step, n: step / n)
    print("The same with the global batch grown with N (each process keeps one machine's batch):")
    print()
    table(lambda step, n: step)
    print("Per process and step, the allreduce moves 2(N-1)/N x parameters x 4 bytes each way;")
    print("latency assumed 25 us (Ethernet, TCP) and 2 us (InfiniBand) per round.")


if __name__ == "__main__":
    main()
