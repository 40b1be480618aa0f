#!/usr/bin/env python3
"""The peer for attn's Transformer benchmark: d2l's PyTorch formulation (10.7),
the same data pipeline and hyperparameters, timed the same way.

    python3 bench/peers/d2l_transformer.py --epochs 200 --threads 2 [--json]

The model's and the data's sizes can be changed as attn train's flags change
them (--num-examples, --num-hiddens, ...), and --max-seconds ends training
after the first step past that many seconds (bench/scale_sweep.py uses both).

Prints training tokens/s, the time of greedy translation of one sentence
(median of many), the final loss and peak RSS. Uses Debian's python3-torch;
run it with OPENBLAS_CORETYPE=SKYLAKEX so that OpenBLAS uses its AVX-512
kernels on a CPU with AVX-512 (not elsewhere: see bench/README.md).
"""
import argparse, gzip, json, os, resource, statistics, sys, time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from d2l_torch import Data, preprocess, tokenize, transformer, xavier_init  # noqa: E402

def masked_ce(pred, label, valid_len):
    mask = (torch.arange(label.shape[1])[None, :] < valid_len[:, None]).float()
    l = nn.functional.cross_entropy(pred.permute(0, 2, 1), label, reduction="none")
    return (l * mask).mean(dim=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="datasets/fra-eng/fra.txt.gz")
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--translate-reps", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--num-examples", type=int, default=600)
    ap.add_argument("--num-steps", type=int, default=10)
    ap.add_argument("--num-hiddens", type=int, default=32)
    ap.add_argument("--ffn-num-hiddens", type=int, default=64)
    ap.add_argument("--num-heads", type=int, default=4)
    ap.add_argument("--num-layers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--max-seconds", type=float, default=0, help="0: no limit")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    opener = gzip.open if a.data.endswith(".gz") else open
    with opener(a.data, "rt", encoding="utf-8") as f:
        src, tgt = tokenize("0.17", preprocess(f.read()), a.num_examples)
    data = Data("0.17", src, tgt, a.num_steps)
    sv, tv = data.src_vocab, data.tgt_vocab
    X, X_len, Y, Y_len = data.src, data.src_len, data.label, data.label_len
    net = transformer("0.17", len(sv), len(tv), a.num_hiddens, a.ffn_num_hiddens, a.num_heads,
                      a.num_layers, 0.1)
    xavier_init(net)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    bos = tv.token_to_idx["<bos>"]
    net.train()
    tokens, steps, start, out_of_time = 0, 0, time.perf_counter(), False
    for epoch in range(a.epochs):
        loss_sum, epoch_tokens = 0.0, 0
        for idx in torch.randperm(len(X)).split(a.batch_size):
            opt.zero_grad()
            xb, xl, yb, yl = X[idx], X_len[idx], Y[idx], Y_len[idx]
            dec_in = torch.cat([torch.full((len(idx), 1), bos), yb[:, :-1]], 1)
            l = masked_ce(net(xb, dec_in, xl), yb, yl)
            l.sum().backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1)
            opt.step()
            steps += 1
            with torch.no_grad():
                loss_sum += float(l.sum())
                epoch_tokens += int(yl.sum())
            if a.max_seconds > 0 and time.perf_counter() - start >= a.max_seconds:
                out_of_time = True
                break
        tokens += epoch_tokens
        if out_of_time:
            break
    seconds = time.perf_counter() - start
    final_loss = loss_sum / epoch_tokens

    # Greedy translation of one sentence, d2l's predict_seq2seq.
    net.eval()
    eos = tv.token_to_idx["<eos>"]

    def translate(sentence):
        ids = sv[sentence.split(" ")] + [sv.token_to_idx["<eos>"]]
        valid = torch.tensor([min(len(ids), a.num_steps)])
        ids = (ids + [sv.token_to_idx["<pad>"]] * a.num_steps)[:a.num_steps]
        with torch.no_grad():
            enc = net.encoder(torch.tensor([ids]), valid)
            state, dec_X, out = net.decoder.init_state(enc, valid), torch.tensor([[bos]]), []
            for _ in range(a.num_steps):
                Yh, state = net.decoder(dec_X, state)
                dec_X = Yh.argmax(dim=2)
                pred = int(dec_X.squeeze())
                if pred == eos:
                    break
                out.append(tv.idx_to_token[pred])
        return " ".join(out)

    times = []
    for _ in range(a.translate_reps):
        t0 = time.perf_counter()
        pred = translate("i'm home .")
        times.append(time.perf_counter() - t0)
    result = {"final_loss": final_loss, "tokens_per_s": tokens / seconds, "train_seconds": seconds,
              "steps": steps, "src_vocab_size": len(sv), "tgt_vocab_size": len(tv),
              "translate_ms": 1000 * statistics.median(times), "translation": pred,
              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    print(json.dumps(result) if a.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
