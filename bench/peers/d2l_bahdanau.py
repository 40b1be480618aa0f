#!/usr/bin/env python3
"""The peer for attn's Bahdanau attention: d2l's RNN encoder-decoder with
additive attention (10.4 of d2l 0.17, PyTorch edition), its data pipeline,
train_seq2seq and predict_seq2seq, with the section's settings.

    OMP_WAIT_POLICY=PASSIVE OPENBLAS_CORETYPE=SKYLAKEX \\
        python3 bench/peers/d2l_bahdanau.py --epochs 250 --threads 2 [--json]

The model, as d2l writes it: Seq2SeqEncoder (Embedding(vocab, embed_size),
GRU(embed_size, num_hiddens, num_layers, dropout)) and Seq2SeqAttentionDecoder
(at each step AdditiveAttention(num_hiddens, num_hiddens, num_hiddens,
dropout) with the last layer's hidden state as the query and the encoder's
outputs (B, T, H) as keys and values, masked by the source's valid lengths;
the context concatenated with the embedded input into GRU(embed_size +
num_hiddens, num_hiddens, num_layers, dropout); Linear(num_hiddens, vocab)).
Training is d2l's train_seq2seq: xavier_uniform_ on the weights of every
Linear and GRU, Adam, MaskedSoftmaxCELoss, <bos> prepended to the decoder's
input, gradients clipped to norm 1. Defaults are d2l's: embed_size 32,
num_hiddens 32, 2 layers, dropout 0.1, batch 64, num_steps 10, lr 0.005,
250 epochs, 600 examples.

Prints the final loss (per target token, the last epoch, as d2l), training
tokens/s (target tokens), seconds, the median time of a greedy translation
of one sentence, peak RSS and d2l's four translations with d2l's BLEU (k=2);
with --json as one line, with the keys of `attn train --metrics-json`. Uses
Debian's python3-torch; run it at its best with OMP_WAIT_POLICY=PASSIVE and
OPENBLAS_CORETYPE=SKYLAKEX (see bench/README.md).
"""
import argparse, collections, gzip, json, math, os, resource, statistics, sys, time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from d2l_torch import Data, bahdanau, preprocess, tokenize, xavier_init  # noqa: E402


def masked_ce(pred, label, valid_len):
    """d2l's MaskedSoftmaxCELoss: per-sequence mean of the masked token losses."""
    mask = (torch.arange(label.shape[1])[None, :] < valid_len[:, None]).float()
    l = nn.functional.cross_entropy(pred.permute(0, 2, 1), label, reduction="none")
    return (l * mask).mean(dim=1)


def bleu(pred_seq, label_seq, k):
    """d2l 9.7.4's BLEU (0 for an empty prediction, where d2l divides by zero)."""
    pred_tokens, label_tokens = pred_seq.split(" "), label_seq.split(" ")
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    if not pred_seq:
        return 0.0
    score = math.exp(min(0, 1 - len_label / len_pred))
    for n in range(1, k + 1):
        num_matches, label_subs = 0, collections.defaultdict(int)
        for i in range(len_label - n + 1):
            label_subs[" ".join(label_tokens[i:i + n])] += 1
        for i in range(len_pred - n + 1):
            if label_subs[" ".join(pred_tokens[i:i + n])] > 0:
                num_matches += 1
                label_subs[" ".join(pred_tokens[i:i + n])] -= 1
        if len_pred - n + 1 <= 0:
            return 0.0
        score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="datasets/fra-eng/fra.txt.gz")
    ap.add_argument("--epochs", type=positive, default=250)
    ap.add_argument("--threads", type=positive, default=2)
    ap.add_argument("--translate-reps", type=positive, default=50)
    ap.add_argument("--json", action="store_true", help="one JSON line")
    ap.add_argument("--num-examples", type=positive, default=600)
    ap.add_argument("--num-steps", type=positive, default=10)
    ap.add_argument("--embed-size", type=positive, default=32)
    ap.add_argument("--num-hiddens", type=positive, default=32)
    ap.add_argument("--num-layers", type=positive, default=2)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--batch-size", type=positive, default=64)
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    opener = gzip.open if a.data.endswith(".gz") else open
    with opener(a.data, "rt", encoding="utf-8") as f:
        src, tgt = tokenize("0.17", preprocess(f.read()), a.num_examples)
    data = Data("0.17", src, tgt, a.num_steps)
    sv, tv = data.src_vocab, data.tgt_vocab
    X, X_len, Y, Y_len = data.src, data.src_len, data.label, data.label_len
    # The model of tools/d2l_torch.py (the one interop_d2l_import checks
    # against attn weight for weight), initialized as d2l 0.17's train_seq2seq.
    net = bahdanau(len(sv), len(tv), a.embed_size, a.num_hiddens, a.num_layers, a.dropout)
    xavier_init(net)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    bos = tv.token_to_idx["<bos>"]
    net.train()
    tokens, start = 0, time.perf_counter()
    for epoch in range(a.epochs):
        loss_sum, epoch_tokens = 0.0, 0
        for idx in torch.randperm(len(X)).split(a.batch_size):
            opt.zero_grad()
            xb, xl, yb, yl = X[idx], X_len[idx], Y[idx], Y_len[idx]
            dec_in = torch.cat([torch.full((len(idx), 1), bos), yb[:, :-1]], 1)
            Y_hat = net(xb, dec_in, xl)
            l = masked_ce(Y_hat, yb, yl)
            l.sum().backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1)
            opt.step()
            with torch.no_grad():
                loss_sum += float(l.sum())
                epoch_tokens += int(yl.sum())
        tokens += epoch_tokens
    seconds = time.perf_counter() - start
    final_loss = loss_sum / epoch_tokens

    # d2l's predict_seq2seq: greedy, one sentence, the source's valid length
    # counting its <eos>.
    net.eval()
    eos = tv.token_to_idx["<eos>"]

    def translate(sentence):
        ids = sv[sentence.lower().split(" ")] + [sv.token_to_idx["<eos>"]]
        valid = torch.tensor([len(ids)])
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

    pairs = [("go .", "va !"), ("i lost .", "j'ai perdu ."), ("he's calm .", "il est calme ."),
             ("i'm home .", "je suis chez moi .")]
    translations = []
    for eng, fra in pairs:
        pred = translate(eng)
        translations.append({"src": eng, "pred": pred, "ref": fra, "bleu": bleu(pred, fra, k=2)})
    times = []
    for _ in range(a.translate_reps):
        t0 = time.perf_counter()
        translate("i'm home .")
        times.append(time.perf_counter() - t0)
    result = {"final_loss": final_loss, "tokens_per_s": tokens / seconds, "train_seconds": seconds,
              "translate_ms": 1000 * statistics.median(times),
              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              "epochs": a.epochs, "threads": a.threads, "translations": translations}
    if a.json:
        print(json.dumps(result))
    else:
        print(f"loss {final_loss:.3f}, {tokens / seconds:.1f} tokens/sec, {seconds:.1f} s "
              f"({a.epochs} epochs, {a.threads} threads)")
        for t in translations:
            print(f"{t['src']} => {t['pred']}, bleu {t['bleu']:.3f}")
        print(f"greedy translation of one sentence: {result['translate_ms']:.2f} ms (median); "
              f"peak RSS {result['peak_rss_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
