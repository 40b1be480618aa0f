#!/usr/bin/env python3
"""The peer of `attn translate` on a subword (SentencePiece) model: batched
greedy and beam-search translation in PyTorch with a KV cache, by attn's
decoding rules, on the weights of an attn model directory.

    OMP_WAIT_POLICY=PASSIVE OPENBLAS_CORETYPE=SKYLAKEX /usr/bin/python3 \\
        bench/peers/translate_peer.py --model out/tatoeba --threads 2 \\
        [--input sentences.txt] [--beam-size 1] --output peer.txt --json

It reads MODEL/config.json, MODEL/model.safetensors and MODEL/spm.model (the
files `attn train --preset tatoeba` writes; docs/model-format.md) and builds
d2l's Transformer of tools/d2l_torch.py with those weights. Sentences come one
per line from --input (a file, or - for stdin), by default the English side of
the first --sentences pairs of MODEL/data/test.tsv.

Decoding, as `attn translate` does it (include/attn/seq2seq/decode.h,
src/seq2seq/translator.cpp, apps/attn/cmd_translate.cpp):

  - the input is taken in chunks of 1024 lines; within a chunk the sentences
    are ordered by their number of pieces (stable) and decoded in batches of
    --batch-size (128); each source is its pieces and <eos>;
  - the encoder runs once per batch; then one decoder step per token
    (tools/d2l_torch.py's CachedDecoder): each step computes only the new
    token's keys and values and appends them to each layer's cache, the
    encoder side is projected once, the t-th input (<bos> at 0) is at
    position t;
  - beam search: every live beam is a batch row; each step ranks, per
    sentence, the candidates (beam, token) by the sum of log-probabilities
    (K + n of them, n its live beams: each row's best K + n first, then the
    sentence's), an <eos> among the first K finishes a hypothesis, any other
    candidate is a live beam until K are; at the length limit the first K
    candidates all finish. The caches are reordered (index_select) to the
    surviving beams' parents; a hypothesis is scored by GNMT's length
    normalization log P / ((5 + |Y|) / 6)^alpha, |Y| counting <eos>;
  - a sentence is done when it has K finished hypotheses, or at its limit, or
    when its best live beam, even at the limit's penalty, cannot beat its best
    finished hypothesis; done sentences leave the batch (their rows and
    encoder side are dropped), so no step works for them;
  - greedy (--beam-size 1) takes the argmax (the first maximal logit);
  - the length limit of a sentence is min(max_len, ceil(3 x its source ids
    with <eos>)) generated tokens with <eos> (--max-length, --max-length-factor
    as attn's flags); defaults: beam 4, length penalty 0.6 (attn's for
    subword models);
  - a blank line translates to an empty one; output is SentencePiece's
    detokenization of the ids.

The time reported is from reading the first sentence to writing the last
translation (tokenizing and detokenizing included), after start-up and
loading the model, as `attn translate --metrics-json` reports it. Runs under
torch.inference_mode(). Needs Debian's python3-torch and python3-sentencepiece.
"""
import argparse
import json
import math
import os
import resource
import struct
import sys
import time

import sentencepiece as spm
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from d2l_torch import CachedDecoder, transformer, unsupported_positions  # noqa: E402
from peer_malloc import tune_malloc  # noqa: E402

PAD, BOS, EOS = 1, 2, 3  # attn's SentencePiece ids: <unk> 0, <pad> 1, <bos> 2, <eos> 3


def read_safetensors(path):
    """The tensors of a safetensors file (F32 or F64, as attn reads), by name."""
    dtypes = {"F32": torch.float32, "F64": torch.float64}
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in dtypes:
            sys.exit(f"translate_peer: {path}: tensor {name} is {info['dtype']}, not F32 or F64")
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=dtypes[info["dtype"]])
        out[name] = t.reshape(info["shape"]).to(torch.float32)
    return out


def load_model(model_dir):
    """d2l's Transformer with the weights of an attn model directory, in eval
    mode, its SentencePiece processor and its config."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("architecture", "transformer") != "transformer" or cfg.get("tokenizer") != "spm":
        sys.exit(f"translate_peer: {model_dir} is not a SentencePiece Transformer "
                 f"(architecture {cfg.get('architecture', 'transformer')}, tokenizer "
                 f"{cfg.get('tokenizer', 'word')})")
    if unsupported_positions(cfg):
        sys.exit(f"translate_peer: {model_dir}: {unsupported_positions(cfg)}")
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "spm.model"))
    assert [sp.id_to_piece(i) for i in range(4)] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    net = transformer("0.17", cfg["src_vocab_size"], cfg["tgt_vocab_size"], cfg["num_hiddens"],
                      cfg["ffn_num_hiddens"], cfg["num_heads"], cfg["num_layers"], cfg["dropout"],
                      cfg["use_bias"], cfg["max_len"], cfg.get("positions", "sinusoidal"))
    net.load_state_dict(read_safetensors(os.path.join(model_dir, "model.safetensors")), strict=True)
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return net, sp, cfg


def length_limit(source_len, max_len, max_length, max_length_factor):
    """decode.h's L_b: generated tokens with <eos>, for a source of source_len ids."""
    limit = max_len
    if max_length > 0:
        limit = min(limit, max_length)
    if max_length_factor > 0:
        limit = min(limit, math.ceil(max_length_factor * source_len - 1e-9))
    return max(limit, 1)


def encode(net, cache, sources):
    """The encoder over a batch of id lists (each with <eos>): the decoder's state."""
    T = max(len(s) for s in sources)
    X = torch.full((len(sources), T), PAD, dtype=torch.long)
    for b, s in enumerate(sources):
        X[b, :len(s)] = torch.tensor(s)
    X_len = torch.tensor([len(s) for s in sources])
    return cache.begin(net.encoder(X, X_len), X_len)


def greedy(net, cache, sources, limits):
    """Greedy translations (ids without <eos>) of one batch."""
    state = encode(net, cache, sources)
    out = [None] * len(sources)
    alive = torch.arange(len(sources))  # the batch's sentence in each row
    limits = torch.tensor(limits)
    tok = torch.full((len(sources),), BOS, dtype=torch.long)
    hist = torch.empty((len(sources), 0), dtype=torch.long)
    for t in range(int(limits.max())):
        nxt = cache.step(tok, t, state).argmax(1)
        hist = torch.cat([hist, nxt[:, None]], 1)
        done = (nxt == EOS) | (limits <= t + 1)
        if bool(done.any()):
            for r in done.nonzero().flatten().tolist():
                ids = hist[r].tolist()
                if ids[-1] == EOS:
                    ids.pop()
                out[int(alive[r])] = ids
            keep = (~done).nonzero().flatten()
            if keep.numel() == 0:
                break
            cache.select(state, keep, keep)  # one row per sentence
            alive, limits, hist, nxt = alive[keep], limits[keep], hist[keep], nxt[keep]
        tok = nxt
    return out


def beam_search(net, cache, sources, limits, K, alpha):
    """The best hypothesis (ids without <eos>) of each sentence of one batch."""
    state = encode(net, cache, sources)
    S, n = len(sources), 1  # sentences still decoding, rows (beams) per sentence
    out = [None] * S
    alive = torch.arange(S)
    limits = torch.tensor(limits)
    lp_limit = ((5.0 + limits.double()) / 6.0) ** alpha
    found = torch.zeros(S, dtype=torch.long)
    best = torch.full((S,), -math.inf, dtype=torch.float64)  # best finished score
    beam_lp = torch.zeros(S, dtype=torch.float64)  # log P of each row's prefix
    tok = torch.full((S,), BOS, dtype=torch.long)
    hist = torch.empty((S, 0), dtype=torch.long)
    rank = torch.arange(2 * K)
    for t in range(int(limits.max())):
        logits = cache.step(tok, t, state)  # (S * n, V)
        C = K + n  # candidates a sentence needs: at most n of them are <eos>
        top_v, top_i = torch.log_softmax(logits, 1).topk(C, dim=1)
        cand = top_v.double() + beam_lp[:, None]
        vals, idx = cand.reshape(S, n * C).topk(C, dim=1)  # best first
        rows = torch.arange(S)[:, None] * n + idx // C  # each candidate's parent row
        toks = top_i.reshape(S, n * C).gather(1, idx)
        is_eos = toks == EOS
        at_limit = limits <= t + 1
        fin = (is_eos | at_limit[:, None]) & (rank[None, :C] < K)
        live = ~is_eos & ~at_limit[:, None]
        live &= live.cumsum(1) <= K
        if bool(fin.any()):
            score = torch.where(fin, vals / ((5.0 + t + 1) / 6.0) ** alpha,
                                torch.tensor(-math.inf, dtype=torch.float64))
            found += fin.sum(1)
            step_best, j = score.max(1)
            better = step_best > best  # on equal scores the earlier hypothesis stays
            for s in better.nonzero().flatten().tolist():
                c = int(j[s])
                ids = hist[rows[s, c]].tolist()
                if not is_eos[s, c]:
                    ids.append(int(toks[s, c]))
                out[int(alive[s])] = ids
            best = torch.where(better, step_best, best)
        # The best live beam can at best end with its log P / lp(limit).
        first_live = vals.gather(1, live.to(torch.uint8).argmax(1, keepdim=True))[:, 0]
        done = at_limit | (found >= K) | ((found >= 1) & (first_live / lp_limit < best))
        keep = (~done).nonzero().flatten()
        if keep.numel() == 0:
            break
        pos = live[keep].nonzero()[:, 1].reshape(-1, K)  # K live candidates per sentence
        parents = rows[keep].gather(1, pos).flatten()
        tok = toks[keep].gather(1, pos).flatten()
        beam_lp = vals[keep].gather(1, pos).flatten()
        hist = torch.cat([hist[parents], tok[:, None]], 1)
        cache.select(state, parents, keep if keep.numel() < S else None, n=K)
        alive, limits, lp_limit = alive[keep], limits[keep], lp_limit[keep]
        found, best = found[keep], best[keep]
        S, n = keep.numel(), K
    return out


def translate_chunk(net, cache, sp, lines, a, max_len):
    """Translations of one chunk of input lines, as attn's translate_texts."""
    ids = [None] * len(lines)
    work = []
    for i, line in enumerate(lines):
        if line.strip(" \t\r\n\f\v"):
            ids[i] = sp.encode(line) + [EOS]
            if len(ids[i]) > max_len:
                sys.exit(f"translate_peer: sentence {i + 1} is {len(ids[i])} tokens long (with "
                         f"<eos>), more than the model's {max_len} positions")
            work.append(i)
    work.sort(key=lambda i: len(ids[i]))  # stable
    out = [""] * len(lines)
    for s in range(0, len(work), a.batch_size):
        index = work[s:s + a.batch_size]
        sources = [ids[i] for i in index]
        limits = [length_limit(len(x), max_len, a.max_length, a.max_length_factor or
                               (0 if a.max_length else 3)) for x in sources]
        if a.beam_size == 1:
            hyps = greedy(net, cache, sources, limits)
        else:
            hyps = beam_search(net, cache, sources, limits, a.beam_size, a.length_penalty)
        for i, h in zip(index, hyps):
            out[i] = sp.decode(h)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="an attn model directory with spm.model")
    ap.add_argument("--input", help="sentences, one per line (- for stdin); default: the English "
                    "side of MODEL/data/test.tsv")
    ap.add_argument("--sentences", type=int, default=2000,
                    help="with the default input: how many test pairs (default 2000)")
    ap.add_argument("--output", help="write the translations here, one per line")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--beam-size", type=int, default=4, help="1: greedy (default 4)")
    ap.add_argument("--length-penalty", type=float, default=0.6, help="GNMT's alpha (default 0.6)")
    ap.add_argument("--max-length", type=int, default=0,
                    help="most generated tokens with <eos> (0: 3 x the source's ids)")
    ap.add_argument("--max-length-factor", type=float, default=0,
                    help="limit ceil(F x the source's ids with <eos>)")
    ap.add_argument("--chunk", type=int, default=1024, help="lines read at a time (attn: 1024)")
    ap.add_argument("--batch-size", type=int, default=128,
                    help="sentences decoded together (default 128, its fastest measured)")
    ap.add_argument("--warmup", type=int, default=0,
                    help="translate this many sentences before the clock starts (default 0, "
                    "as attn does none)")
    ap.add_argument("--malloc", choices=["heap", "default"], default="heap",
                    help="heap: glibc keeps freed memory for reuse (mallopt; the default); "
                    "default: glibc's own settings")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    a = ap.parse_args()
    if a.beam_size < 1 or a.batch_size < 1 or a.chunk < 1 or a.length_penalty < 0:
        ap.error("--beam-size, --batch-size and --chunk must be positive, --length-penalty >= 0")

    malloc_tuned = tune_malloc() if a.malloc == "heap" else False
    torch.set_num_threads(a.threads)
    load_start = time.perf_counter()
    net, sp, cfg = load_model(a.model)
    cache = CachedDecoder(net.decoder)
    max_len = cfg["max_len"]
    load_s = time.perf_counter() - load_start

    def read_lines():
        if a.input == "-":
            return [line.rstrip("\n").rstrip("\r") for line in sys.stdin]
        if a.input:
            with open(a.input, encoding="utf-8") as f:
                return [line.rstrip("\n").rstrip("\r") for line in f]
        with open(os.path.join(a.model, "data", "test.tsv"), encoding="utf-8") as f:
            return [line.split("\t", 1)[0] for line in f.read().split("\n")[:a.sentences] if line]

    with torch.inference_mode():
        if a.warmup > 0:
            translate_chunk(net, cache, sp, read_lines()[:a.warmup], a, max_len)
        start, cpu_start = time.perf_counter(), time.process_time()
        lines = read_lines()
        out = open(a.output, "w", encoding="utf-8") if a.output else None
        for c in range(0, len(lines), a.chunk):
            translations = translate_chunk(net, cache, sp, lines[c:c + a.chunk], a, max_len)
            if out:
                out.writelines(t + "\n" for t in translations)
                out.flush()
        if out:
            out.close()
        seconds = time.perf_counter() - start
        cpu_seconds = time.process_time() - cpu_start

    result = {"sentences": len(lines), "seconds": seconds, "sentences_per_s": len(lines) / seconds,
              "cpu_seconds": cpu_seconds, "load_seconds": load_s, "beam_size": a.beam_size,
              "length_penalty": a.length_penalty if a.beam_size > 1 else None,
              "batch_size": a.batch_size, "chunk": a.chunk, "threads": a.threads,
              "torch": torch.__version__, "malloc_tuned": malloc_tuned,
              "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
              "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if a.json:
        print(json.dumps(result))
    else:
        print(f"translate_peer: {len(lines)} sentences in {seconds:.3f} s "
              f"({result['sentences_per_s']:.1f} sentences/s), "
              f"{'greedy' if a.beam_size == 1 else f'beam {a.beam_size}'}, "
              f"{a.threads} threads (model loaded in {load_s:.2f} s)")


if __name__ == "__main__":
    main()
