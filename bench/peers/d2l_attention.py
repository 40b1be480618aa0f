#!/usr/bin/env python3
"""The peer for `attn bench attention`: d2l's DotProductAttention (10.3) in
PyTorch, i.e. torch.bmm, d2l's masked_softmax, torch.bmm, on the multi-head
layout (B * heads, T, head_dim) it sees after transpose_qkv.

    OPENBLAS_CORETYPE=SKYLAKEX python3 bench/peers/d2l_attention.py \\
        --len 2048 --heads 8 --dim 64 --threads 2 --backward [--causal] [--json]

Same sizes, flags, timing and output as attn's command: the forward under
torch.no_grad(), with --backward also forward + backward (q, k, v require
grad); one warm-up run, then --repeats runs, the median reported. --causal is
d2l's decoder masking, valid lengths 1..T per query (dec_valid_lens), applied
by masked_softmax to the full score matrix. FLOPs follow the FlashAttention
convention (forward 4 B H T^2 D, halved when causal; backward 2.5 times that),
the same count for both sides whatever each computes. With --json, one line
with the keys fwd_ms, fwdbwd_ms (null without --backward), gflops (forward),
fwdbwd_gflops and peak_rss_mib (ru_maxrss of this process). --precision bf16
runs both under torch.autocast("cpu", dtype=torch.bfloat16) (PyTorch's CPU
mixed precision: the bmm products in bf16 on oneDNN). glibc's malloc is told
to keep freed memory (--malloc heap, the default; peer_malloc.py).
Uses Debian's python3-torch; run it with OPENBLAS_CORETYPE=SKYLAKEX so that
OpenBLAS uses its AVX-512 kernels on a CPU with AVX-512 (not elsewhere: see
bench/README.md).
"""
import argparse, contextlib, json, math, resource, statistics, sys, time

import torch
from torch import nn

from peer_malloc import tune_malloc


def masked_softmax(X, valid_lens):
    """d2l 10.3: softmax over the last axis with the entries past each row's
    valid length replaced by -1e6."""
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1], dtype=torch.float32)[None, :] < valid_lens[:, None]
    X[~mask] = -1e6
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def median_ms(repeats, fn):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--len", type=positive, default=1024, help="sequence length (queries = keys)")
    p.add_argument("--heads", type=positive, default=8)
    p.add_argument("--dim", type=positive, default=64, help="head dimension")
    p.add_argument("--batch", type=positive, default=1)
    p.add_argument("--causal", action="store_true", help="d2l's dec_valid_lens = 1..T")
    p.add_argument("--backward", action="store_true", help="also time forward + backward")
    p.add_argument("--threads", type=positive, default=2)
    p.add_argument("--repeats", type=positive, default=5)
    p.add_argument("--json", action="store_true", help="one JSON line")
    p.add_argument("--precision", choices=("f32", "bf16"), default="f32",
                   help="bf16: under torch.autocast on the CPU")
    p.add_argument("--malloc", choices=("heap", "default"), default="heap",
                   help="heap: glibc keeps freed memory (peer_malloc.py)")
    a = p.parse_args()
    malloc_tuned = tune_malloc() if a.malloc == "heap" else False

    def precision():
        if a.precision == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    n, T, D = a.batch * a.heads, a.len, a.dim
    q, k, v, g = (torch.rand(n, T, D) * 2 - 1 for _ in range(4))
    valid_lens = torch.arange(1, T + 1).repeat(n, 1) if a.causal else None
    attention = DotProductAttention().eval()
    flops = 4.0 * a.batch * a.heads * T * T * D / (2 if a.causal else 1)

    def forward():
        with torch.no_grad(), precision():
            attention(q, k, v, valid_lens)

    fwd_ms = median_ms(a.repeats, forward)
    fwdbwd_ms = None
    if a.backward:
        for t in (q, k, v):
            t.requires_grad_()

        def forward_backward():
            with precision():
                out = attention(q, k, v, valid_lens)
            out.backward(g.to(out.dtype))
            for t in (q, k, v):
                t.grad = None

        fwdbwd_ms = median_ms(a.repeats, forward_backward)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    result = {
        "kernel": "pytorch-d2l",
        "batch": a.batch,
        "len": T,
        "heads": a.heads,
        "dim": D,
        "causal": a.causal,
        "precision": a.precision,
        "malloc_tuned": malloc_tuned,
        "threads": torch.get_num_threads(),
        "repeats": a.repeats,
        "fwd_ms": fwd_ms,
        "fwdbwd_ms": fwdbwd_ms,
        "gflops": flops / (fwd_ms * 1e6),
        "fwdbwd_gflops": 3.5 * flops / (fwdbwd_ms * 1e6) if fwdbwd_ms else None,
        "peak_rss_mib": rss,
    }
    if a.json:
        print(json.dumps(result))
        return
    print(f"attention (PyTorch {torch.__version__}, d2l formulation, {a.precision}): batch {a.batch}, "
          f"{a.heads} heads, length {T}, head dim {D}, {'causal' if a.causal else 'no mask'}, "
          f"{result['threads']} threads")
    print(f"forward           {fwd_ms:10.3f} ms  {result['gflops']:8.1f} GFLOP/s  (median of {a.repeats})")
    if fwdbwd_ms:
        print(f"forward+backward  {fwdbwd_ms:10.3f} ms  {result['fwdbwd_gflops']:8.1f} GFLOP/s")
    print(f"peak RSS          {rss:10.1f} MiB")


if __name__ == "__main__":
    sys.exit(main())
