#!/usr/bin/env python3
"""Models in from d2l's PyTorch code: train a tiny Transformer the way d2l 0.17
and d2l 1.0 do (their data pipelines, vocabulary orders, module structure and
losses), and d2l 0.17's RNN encoder-decoder with Bahdanau attention (10.4),
export each with tools/export_d2l.py, and check attn against PyTorch:

  - attn's teacher-forced loss (`attn evaluate --json`) on pairs seen and
    unseen in training equals PyTorch's to 1e-5 relative;
  - every greedy translation (`attn translate`) is identical to PyTorch's.

    /usr/bin/python3 tests/interop/d2l_import_test.py --attn build/release/attn \\
        --corpus datasets/fra-eng/fra.txt.gz --work /tmp/d2l_import

PyTorch's greedy decoding here gives the t-th generated token position t and
the causal mask, as attn does (d2l's own predict step adds position 0's
encoding at every step, docs/design/d2l.md); it recomputes the whole prefix at
every step, so it also checks attn's KV cache. Exits 77 (a skip, with a
message) when PyTorch is not installed; Debian's python3-torch is installed by
scripts/install-deps.sh.

The model and data code is tools/d2l_torch.py, written after the structure of
d2l's (the same module names, so the same state_dict names, and the same
math); the parts that differ between the editions follow each edition.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys

try:
    import torch
    from torch import nn
except ImportError:
    print("SKIP: PyTorch is not installed (Debian: python3-torch, installed by "
          "scripts/install-deps.sh); the d2l import test needs it")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")
EXPORT = os.path.join(TOOLS, "export_d2l.py")
sys.path.insert(0, TOOLS)
from d2l_torch import (Data, bahdanau, inference_mode, preprocess, tokenize, transformer,  # noqa: E402
                       xavier_init, fit)
REL_TOL = 1e-5


# ---- training, loss, translation ----

SIZES = dict(hiddens=32, ffn=64, heads=4, layers=2, dropout=0.1)


def train(data, epochs, use_bias, seed, model="transformer"):
    torch.manual_seed(seed)
    s = SIZES
    if model == "bahdanau":  # d2l 10.4's sizes: embed_size 32, num_hiddens 32, 2 layers
        net = bahdanau(len(data.src_vocab), len(data.tgt_vocab), 32, s["hiddens"], s["layers"],
                       s["dropout"])
    else:
        net = transformer(data.edition, len(data.src_vocab), len(data.tgt_vocab), s["hiddens"],
                          s["ffn"], s["heads"], s["layers"], s["dropout"], use_bias)
    if data.edition == "0.17":  # train_seq2seq's xavier_init_weights
        xavier_init(net)
    else:  # materialize the lazy layers with one forward pass
        net(data.src[:2], data.decoder_input(data.label[:2]), data.src_len[:2])
    opt = torch.optim.Adam(net.parameters(), lr=0.005)
    pad = data.tgt_vocab.token_to_idx["<pad>"]
    net.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(data.src)).split(64):
            X, X_len, Y, Y_len = data.src[idx], data.src_len[idx], data.label[idx], data.label_len[idx]
            Y_hat = net(X, data.decoder_input(Y), X_len)
            ce = nn.functional.cross_entropy(Y_hat.permute(0, 2, 1), Y, reduction="none")
            if data.edition == "0.17":  # MaskedSoftmaxCELoss, summed
                mask = (torch.arange(Y.shape[1])[None, :] < Y_len[:, None]).float()
                loss = (ce * mask).mean(dim=1).sum()
            else:  # Seq2Seq.loss: the mean over non-<pad> labels
                mask = (Y != pad).float()
                loss = (ce * mask).sum() / mask.sum()
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1)
            opt.step()
    return net


def teacher_forced_loss(net, data):
    """attn evaluate's loss: sum over sentences of the masked cross-entropy
    averaged over num_steps (d2l 0.17's MaskedSoftmaxCELoss), divided by the
    number of target tokens."""
    inference_mode(net)
    with torch.no_grad():
        Y_hat = net(data.src, data.decoder_input(data.label), data.src_len)
        ce = nn.functional.cross_entropy(Y_hat.permute(0, 2, 1), data.label, reduction="none")
        mask = (torch.arange(data.label.shape[1])[None, :] < data.label_len[:, None]).float()
        per_sentence = (ce * mask).mean(dim=1)
    return per_sentence.double().sum().item() / data.label_len.double().sum().item()


def translate(net, data, sentences):
    """Greedy decoding, the whole prefix recomputed at every step."""
    src_tokens, _ = tokenize(data.edition, "\n".join(preprocess(s) + "\tx" for s in sentences))
    if data.edition == "0.17":
        src_tokens = [s + ["<eos>"] for s in src_tokens]
    T = data.num_steps
    pad, eos = data.src_vocab.token_to_idx["<pad>"], data.tgt_vocab.token_to_idx["<eos>"]
    X = torch.tensor([data.src_vocab[fit(s, T)] for s in src_tokens])
    X_len = torch.tensor([min(len(s), T) for s in src_tokens])
    assert (X_len == (X != pad).sum(1)).all()
    inference_mode(net)
    prefix = torch.full((len(sentences), 1), data.bos)
    out, done = [[] for _ in sentences], [False] * len(sentences)
    with torch.no_grad():
        for _ in range(T):
            nxt = net(X, prefix, X_len)[:, -1, :].argmax(dim=1)
            for b, tok in enumerate(nxt.tolist()):
                if not done[b]:
                    if tok == eos:
                        done[b] = True
                    else:
                        out[b].append(data.tgt_vocab.idx_to_token[tok])
            if all(done):
                break
            prefix = torch.cat([prefix, nxt[:, None]], 1)
    return [" ".join(t) for t in out]


def run(cmd, **kwargs):
    r = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout


def check_edition(edition, a, text, lines, model="transformer"):
    num_steps, use_bias = (10, False) if edition == "0.17" else (9, True)
    src, tgt = tokenize(edition, text, a.num_examples)
    data = Data(edition, src, tgt, num_steps)
    net = train(data, a.epochs, use_bias, seed=17 if edition == "0.17" else 10, model=model)
    unk = (data.src_vocab.unk, data.tgt_vocab.unk)
    print(f"d2l {edition} {model}: {len(data.src)} pairs, vocabularies {len(data.src_vocab)} / "
          f"{len(data.tgt_vocab)}, <unk> at index {unk[0]} / {unk[1]}"
          + ("" if model == "bahdanau" else
             f", {'with' if use_bias else 'without'} attention biases in the encoder"))

    # Export through the command line, as a user would.
    work = os.path.join(a.work, "d2l-" + edition + ("-" + model if model != "transformer" else ""))
    os.makedirs(work, exist_ok=True)
    ckpt, model = os.path.join(work, "d2l.pt"), os.path.join(work, "model")
    torch.save({"state_dict": net.state_dict(), "src_vocab": data.src_vocab.idx_to_token,
                "tgt_vocab": data.tgt_vocab.idx_to_token}, ckpt)
    print(run([sys.executable, EXPORT, ckpt, model, "--num-heads", str(SIZES["heads"]),
               "--num-steps", str(num_steps), "--dropout", str(SIZES["dropout"]), "--overwrite"]),
          end="")

    # Teacher-forced loss on pairs seen and unseen in training.
    pairs = os.path.join(work, "pairs.txt")
    with open(pairs, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    e_src, e_tgt = tokenize(edition, "\n".join(preprocess(l) for l in lines))
    eval_data = Data(edition, e_src, e_tgt, num_steps, (data.src_vocab, data.tgt_vocab))
    ref = teacher_forced_loss(net, eval_data)
    got = json.loads(run([a.attn, "--threads", "1", "evaluate", "--model", model, "--data", pairs,
                          "--json"]))
    rel = abs(got["loss"] - ref) / abs(ref)
    unknown = int((eval_data.src == data.src_vocab.unk).sum())
    print(f"  teacher-forced loss over {got['pairs']} pairs ({unknown} unknown source words): "
          f"attn {got['loss']:.9f}, PyTorch {ref:.9f}, relative difference {rel:.2e}")
    ok = got["pairs"] == len(lines) and rel <= REL_TOL

    # Greedy translations.
    sentences = [l.split("\t")[0] for l in lines] + EXTRA_SENTENCES
    want = translate(net, data, sentences)
    got_t = run([a.attn, "--threads", "1", "translate", "--model", model],
                input="".join(s + "\n" for s in sentences)).split("\n")[:-1]
    same = sum(x == y for x, y in zip(got_t, want))
    print(f"  greedy translations: {same} of {len(sentences)} identical")
    for s, x, y in zip(sentences, got_t, want):
        if x != y:
            print(f"    {s!r}: attn {x!r}, PyTorch {y!r}")
    return ok and len(got_t) == len(want) and same == len(want)


# Sentences with words the model never saw and sentences longer than num_steps.
EXTRA_SENTENCES = [
    "the zyzzyva quibbles .",
    "xylophones ?",
    "i think that we should go home now because it is very late and cold .",
    "tom , mary and i saw the big red dog yesterday !",
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attn", required=True, help="the attn executable")
    p.add_argument("--corpus", required=True, help="datasets/fra-eng/fra.txt.gz")
    p.add_argument("--work", required=True, help="a directory for the models")
    p.add_argument("--num-examples", type=int, default=300)
    p.add_argument("--epochs", type=int, default=20)
    a = p.parse_args()
    torch.set_num_threads(1)
    with gzip.open(a.corpus, "rt", encoding="utf-8") as f:
        raw = f.read()
    text = preprocess(raw)
    raw_lines = raw.split("\n")
    # Pairs seen in training and pairs far beyond it, whose tokens both
    # editions split alike (no double spaces: d2l 1.0 drops the empty tokens
    # that d2l 0.17 and attn keep).
    def split_alike(line):
        (s17,), (t17,) = tokenize("0.17", preprocess(line))
        (s10,), (t10,) = tokenize("1.0", preprocess(line))
        return s17 + ["<eos>"] == s10 and t17 + ["<eos>"] == t10

    lines = [l for l in raw_lines[:100] + raw_lines[5000:5100] if split_alike(l)]
    ok = True
    for edition in ("0.17", "1.0"):
        ok = check_edition(edition, a, text, lines) and ok
    ok = check_edition("0.17", a, text, lines, model="bahdanau") and ok
    print("d2l import: " + ("every check passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
