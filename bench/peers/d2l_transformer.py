#!/usr/bin/env python3
"""The peer for attn's Transformer benchmark: d2l's PyTorch formulation (10.7),
the same data pipeline and hyperparameters, timed the same way.

    python3 bench/peers/d2l_transformer.py --epochs 200 --threads 2 [--json]

Prints training tokens/s, the time of greedy translation of one sentence
(median of many), the final loss and peak RSS. Uses Debian's python3-torch;
run it with OPENBLAS_CORETYPE=SKYLAKEX so that OpenBLAS uses its AVX-512
kernels on this CPU (see bench/README.md).
"""
import argparse, gzip, json, math, resource, statistics, time
from collections import Counter

import torch
from torch import nn

RESERVED = ["<pad>", "<bos>", "<eos>"]


def preprocess(text):
    text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
    out = [" " + c if i > 0 and c in ",.!?" and text[i - 1] != " " else c for i, c in enumerate(text)]
    return "".join(out)


def tokenize(text, num_examples):
    src, tgt = [], []
    for i, line in enumerate(text.split("\n")):
        if num_examples and i > num_examples:
            break
        parts = line.split("\t")
        if len(parts) == 2:
            src.append(parts[0].split(" "))
            tgt.append(parts[1].split(" "))
    return src, tgt


class Vocab:
    def __init__(self, lines, min_freq=2):
        counts = sorted(Counter(t for l in lines for t in l).items(), key=lambda x: x[1], reverse=True)
        self.idx_to_token = ["<unk>"] + RESERVED
        self.token_to_idx = {t: i for i, t in enumerate(self.idx_to_token)}
        for tok, freq in counts:
            if freq < min_freq:
                break
            if tok not in self.token_to_idx:
                self.token_to_idx[tok] = len(self.idx_to_token)
                self.idx_to_token.append(tok)

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, toks):
        return [self.token_to_idx.get(t, 0) for t in toks]


def build_array(lines, vocab, num_steps):
    rows = []
    for l in lines:
        ids = vocab[l] + [vocab.token_to_idx["<eos>"]]
        ids = ids[:num_steps] + [vocab.token_to_idx["<pad>"]] * max(0, num_steps - len(ids))
        rows.append(ids)
    a = torch.tensor(rows)
    return a, (a != vocab.token_to_idx["<pad>"]).type(torch.int32).sum(1)


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    valid_lens = torch.repeat_interleave(valid_lens, shape[1]) if valid_lens.dim() == 1 else valid_lens.reshape(-1)
    X = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1], dtype=torch.float32)[None, :] < valid_lens[:, None]
    X[~mask] = -1e6
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v, valid_lens=None):
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), v)


def transpose_qkv(X, h):
    X = X.reshape(X.shape[0], X.shape[1], h, -1).permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, h):
    X = X.reshape(-1, h, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, n, heads, dropout):
        super().__init__()
        self.num_heads = heads
        self.attention = DotProductAttention(dropout)
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(n, n, bias=False) for _ in range(4))

    def forward(self, q, k, v, valid_lens):
        q, k, v = (transpose_qkv(W(x), self.num_heads) for W, x in ((self.W_q, q), (self.W_k, k), (self.W_v, v)))
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        return self.W_o(transpose_output(self.attention(q, k, v, valid_lens), self.num_heads))


class PositionWiseFFN(nn.Module):
    def __init__(self, n, hidden):
        super().__init__()
        self.dense1, self.relu, self.dense2 = nn.Linear(n, hidden), nn.ReLU(), nn.Linear(hidden, n)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):
    def __init__(self, n, dropout):
        super().__init__()
        self.dropout, self.ln = nn.Dropout(dropout), nn.LayerNorm(n)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class PositionalEncoding(nn.Module):
    def __init__(self, n, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = torch.zeros((1, max_len, n))
        X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
            10000, torch.arange(0, n, 2, dtype=torch.float32) / n)
        self.P[:, :, 0::2], self.P[:, :, 1::2] = torch.sin(X), torch.cos(X)

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class EncoderBlock(nn.Module):
    def __init__(self, n, ffn, heads, dropout):
        super().__init__()
        self.attention = MultiHeadAttention(n, heads, dropout)
        self.addnorm1, self.ffn, self.addnorm2 = AddNorm(n, dropout), PositionWiseFFN(n, ffn), AddNorm(n, dropout)

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class DecoderBlock(nn.Module):
    def __init__(self, n, ffn, heads, dropout, i):
        super().__init__()
        self.i = i
        self.attention1, self.addnorm1 = MultiHeadAttention(n, heads, dropout), AddNorm(n, dropout)
        self.attention2, self.addnorm2 = MultiHeadAttention(n, heads, dropout), AddNorm(n, dropout)
        self.ffn, self.addnorm3 = PositionWiseFFN(n, ffn), AddNorm(n, dropout)

    def forward(self, X, state):
        enc_outputs, enc_valid_lens = state[0], state[1]
        key_values = X if state[2][self.i] is None else torch.cat((state[2][self.i], X), axis=1)
        state[2][self.i] = key_values
        dec_valid_lens = torch.arange(1, X.shape[1] + 1).repeat(X.shape[0], 1) if self.training else None
        Y = self.addnorm1(X, self.attention1(X, key_values, key_values, dec_valid_lens))
        Z = self.addnorm2(Y, self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens))
        return self.addnorm3(Z, self.ffn(Z)), state


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, n, ffn, heads, layers, dropout):
        super().__init__()
        self.n, self.layers = n, layers
        self.src_emb, self.tgt_emb = nn.Embedding(src_vocab, n), nn.Embedding(tgt_vocab, n)
        self.pos = PositionalEncoding(n, dropout)
        self.enc = nn.ModuleList([EncoderBlock(n, ffn, heads, dropout) for _ in range(layers)])
        self.dec = nn.ModuleList([DecoderBlock(n, ffn, heads, dropout, i) for i in range(layers)])
        self.dense = nn.Linear(n, tgt_vocab)

    def encode(self, X, valid_lens):
        X = self.pos(self.src_emb(X) * math.sqrt(self.n))
        for blk in self.enc:
            X = blk(X, valid_lens)
        return X

    def decode(self, X, state):
        X = self.pos(self.tgt_emb(X) * math.sqrt(self.n))
        for blk in self.dec:
            X, state = blk(X, state)
        return self.dense(X), state

    def forward(self, enc_X, dec_X, enc_valid_lens):
        enc = self.encode(enc_X, enc_valid_lens)
        return self.decode(dec_X, [enc, enc_valid_lens, [None] * self.layers])[0]


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
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    opener = gzip.open if a.data.endswith(".gz") else open
    with opener(a.data, "rt", encoding="utf-8") as f:
        src, tgt = tokenize(preprocess(f.read()), 600)
    sv, tv = Vocab(src), Vocab(tgt)
    X, X_len = build_array(src, sv, 10)
    Y, Y_len = build_array(tgt, tv, 10)
    net = Transformer(len(sv), len(tv), 32, 64, 4, 2, 0.1)
    for m in net.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
    opt = torch.optim.Adam(net.parameters(), lr=0.005)
    bos = tv.token_to_idx["<bos>"]
    net.train()
    tokens, start = 0, time.perf_counter()
    for epoch in range(a.epochs):
        loss_sum, epoch_tokens = 0.0, 0
        for idx in torch.randperm(len(X)).split(64):
            opt.zero_grad()
            xb, xl, yb, yl = X[idx], X_len[idx], Y[idx], Y_len[idx]
            dec_in = torch.cat([torch.full((len(idx), 1), bos), yb[:, :-1]], 1)
            l = masked_ce(net(xb, dec_in, xl), yb, yl)
            l.sum().backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1)
            opt.step()
            with torch.no_grad():
                loss_sum += float(l.sum())
                epoch_tokens += int(yl.sum())
        tokens += epoch_tokens
    seconds = time.perf_counter() - start
    final_loss = loss_sum / epoch_tokens

    # Greedy translation of one sentence, d2l's predict_seq2seq.
    net.eval()
    eos = tv.token_to_idx["<eos>"]

    def translate(sentence):
        ids = sv[sentence.split(" ")] + [sv.token_to_idx["<eos>"]]
        valid = torch.tensor([min(len(ids), 10)])
        ids = (ids + [sv.token_to_idx["<pad>"]] * 10)[:10]
        with torch.no_grad():
            enc = net.encode(torch.tensor([ids]), valid)
            state, dec_X, out = [enc, valid, [None] * net.layers], torch.tensor([[bos]]), []
            for _ in range(10):
                Yh, state = net.decode(dec_X, state)
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
              "translate_ms": 1000 * statistics.median(times), "translation": pred,
              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    print(json.dumps(result) if a.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
