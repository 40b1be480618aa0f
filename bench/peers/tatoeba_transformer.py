#!/usr/bin/env python3
"""The peer of `attn train --preset tatoeba`: the same recipe in PyTorch, on the
same data, given the same wall time, scored by the same BLEU.

It reads everything from an attn run, so that nothing can drift apart:

  MODEL/data/{train,valid,test}.tsv  the split attn made (grouped by source)
  MODEL/spm.model                    the SentencePiece model attn trained on it
  MODEL/config.json                  the model's sizes
  MODEL/training.json                the recipe: batch_tokens, max_length,
                                     label_smoothing, Adam's betas and eps, lr,
                                     lr_warmup, lr_schedule, grad_clip,
                                     valid_freq, time_limit, embedding_init, seed

and trains d2l's Transformer (tools/d2l_torch.py: post-norm, sinusoidal
positions, the same parameter names and initialization as attn) with token
batches built as attn builds them (pairs sorted by target then source length,
packed while the longest side times the count stays within batch_tokens; the
batches shuffled each epoch), the label-smoothed per-token loss, Adam with
warmup and inverse-square-root decay, and gradient clipping. Every valid_freq
steps, and at the end, it validates as attn does: the per-token loss and
perplexity (no smoothing), and the corpus BLEU of greedy translations
(KV-cached, at most 3 x the source's ids) scored by `attn bleu` (sacreBLEU's
13a, cased). The clock counts validation, as attn's time limit does. At the
end the best model (by validation BLEU) translates the test split.

    OMP_WAIT_POLICY=PASSIVE OPENBLAS_CORETYPE=SKYLAKEX /usr/bin/python3 \\
        bench/peers/tatoeba_transformer.py --model out/tatoeba --attn build/release/attn \\
        --threads 2 --out /tmp/peer [--minutes 60]

Writes OUT/validations.json (one object per validation: step, minutes, loss,
perplexity, bleu) and OUT/result.json, and prints one line per validation.
Needs Debian's python3-torch and python3-sentencepiece.
"""
import argparse
import copy
import json
import math
import os
import random
import resource
import subprocess
import sys
import time

import sentencepiece as spm
import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from d2l_torch import (inference_mode, masked_softmax, rotary, transformer,  # noqa: E402
                       unsupported_positions, xavier_init)

PAD, BOS, EOS = 1, 2, 3  # attn's SentencePiece ids: <unk> 0, <pad> 1, <bos> 2, <eos> 3


def read_tsv(path):
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                src, tgt = line.split("\t", 1)
                pairs.append((src, tgt))
    return pairs


def encode_pairs(sp, pairs, max_length):
    """Token ids of each side and the text of the pairs kept; pairs with a
    side longer than max_length with <eos> are dropped (and counted), as
    attn's tokenize_pairs does."""
    src = sp.encode([p[0] for p in pairs])
    tgt = sp.encode([p[1] for p in pairs])
    keep = [i for i in range(len(pairs))
            if len(src[i]) + 1 <= max_length and len(tgt[i]) + 1 <= max_length]
    return [(src[i], tgt[i]) for i in keep], [pairs[i] for i in keep], len(pairs) - len(keep)


def token_batches(pairs, max_tokens, seed):
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)  # the order of pairs of equal lengths
    rank = {i: r for r, i in enumerate(order)}
    idx = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][1]), len(pairs[i][0]), rank[i]))
    batches, cur, longest = [], [], 0
    for i in idx:
        n = max(len(pairs[i][0]), len(pairs[i][1])) + 1
        if cur and max(longest, n) * (len(cur) + 1) > max_tokens:
            batches.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        batches.append(cur)
    return batches


def pad_side(seqs):
    """ids + <eos>, padded: (B, T) and the valid lengths."""
    T = max(len(s) for s in seqs) + 1
    ids = torch.full((len(seqs), T), PAD, dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, :len(s) + 1] = torch.tensor(s + [EOS])
    return ids, torch.tensor([len(s) + 1 for s in seqs])


def make_batch(pairs, index):
    X, X_len = pad_side([pairs[i][0] for i in index])
    Y, Y_len = pad_side([pairs[i][1] for i in index])
    return X, X_len, Y, Y_len


def decoder_input(Y):
    return torch.cat([torch.full((Y.shape[0], 1), BOS), Y[:, :-1]], 1)


def scheduled_lr(lr, step, warmup, schedule):
    w = max(warmup, 1)
    if schedule == "inverse-sqrt":
        return lr * min(step / w, math.sqrt(w / step))
    return lr if warmup == 0 else lr * min(1.0, step / w)


def nll_per_token(net, pairs, max_tokens):
    """Teacher-forced cross-entropy per target token (with <eos>), no smoothing.

    d2l's decoder applies its causal mask only in training mode (in eval mode
    it expects one token at a time), so the blocks stay in training mode here
    and only dropout is switched off."""
    net.train()
    for m in net.modules():
        if isinstance(m, nn.Dropout):
            m.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for index in token_batches(pairs, max_tokens, 0):
            X, X_len, Y, Y_len = make_batch(pairs, index)
            Y_hat = net(X, decoder_input(Y), X_len)
            mask = (torch.arange(Y.shape[1])[None, :] < Y_len[:, None]).float()
            ce = nn.functional.cross_entropy(Y_hat.permute(0, 2, 1), Y, reduction="none")
            total += float((ce * mask).sum())
            tokens += int(Y_len.sum())
    return total / tokens


def merge_heads(X, heads):
    """(B * heads, T, d / heads) -> (B, T, d)"""
    X = X.reshape(-1, heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def decode_step(dec, tok, t, self_kv, cross_kv, src_valid):
    """One token per sentence through the decoder, at position t, with the
    projected keys and values of earlier positions cached per layer
    (self_kv, grown here) and the encoder's projected once (cross_kv): the
    same math as the whole-sequence decoder with its causal mask."""
    X = dec.pos_encoding(dec.embedding(tok) * math.sqrt(dec.num_hiddens), t)
    for i, blk in enumerate(dec.blks):
        a1 = blk.attention1
        q, k, v = a1.split(a1.W_q(X)), a1.split(a1.W_k(X)), a1.split(a1.W_v(X))
        if a1.rotary:  # the cache keeps keys turned
            q, k = rotary(q, t), rotary(k, t)
        if self_kv[i] is not None:
            k, v = torch.cat([self_kv[i][0], k], 1), torch.cat([self_kv[i][1], v], 1)
        self_kv[i] = (k, v)
        w = torch.softmax(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1]), dim=-1)
        Y = blk.addnorm1(X, a1.W_o(merge_heads(torch.bmm(w, v), a1.num_heads)))
        a2 = blk.attention2
        q2 = a2.split(a2.W_q(Y))
        k2, v2 = cross_kv[i]
        scores = torch.bmm(q2, k2.transpose(1, 2)) / math.sqrt(q2.shape[-1])
        w2 = masked_softmax(scores, src_valid)
        Z = blk.addnorm2(Y, a2.W_o(merge_heads(torch.bmm(w2, v2), a2.num_heads)))
        X = blk.addnorm3(Z, blk.ffn(Z))
    return dec.dense(X)


def check_cached_decoder(net, pairs, tol=1e-4):
    """The cached decoder step (decode_step) against the whole-sequence
    decoder with its causal mask (dropout off), teacher-forced on `pairs`:
    the largest difference of the logits, which must be below `tol`."""
    inference_mode(net)
    X, X_len, Y, _ = make_batch(pairs, list(range(len(pairs))))
    with torch.no_grad():
        full = net(X, decoder_input(Y), X_len)
        net.eval()
        enc = net.encoder(X, X_len)
        dec = net.decoder
        cross_kv = [(blk.attention2.split(blk.attention2.W_k(enc)),
                     blk.attention2.split(blk.attention2.W_v(enc))) for blk in dec.blks]
        heads = dec.blks[0].attention2.num_heads
        self_kv, inputs, steps = [None] * len(dec.blks), decoder_input(Y), []
        for t in range(inputs.shape[1]):
            steps.append(decode_step(dec, inputs[:, t:t + 1], t, self_kv, cross_kv,
                                     torch.repeat_interleave(X_len, heads)))
    diff = float((torch.cat(steps, 1) - full).abs().max())
    if not diff < tol:
        raise SystemExit(f"peer: the cached decoder differs from the full one by {diff}")
    return diff


def greedy(net, sources, max_len, batch_size=128):
    """Greedy translations (ids without <eos>) of id sequences: batched by
    length, projected keys and values cached, the t-th generated token at
    position t, at most min(max_len, 3 x the source's ids with <eos>) tokens
    with <eos>. Sentences that are done leave the batch."""
    net.eval()
    out = [None] * len(sources)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    dec = net.decoder
    with torch.no_grad():
        for s in range(0, len(order), batch_size):
            index = order[s:s + batch_size]
            X, X_len = pad_side([sources[i] for i in index])
            enc = net.encoder(X, X_len)
            cross_kv = [(blk.attention2.split(blk.attention2.W_k(enc)),
                         blk.attention2.split(blk.attention2.W_v(enc))) for blk in dec.blks]
            heads = dec.blks[0].attention2.num_heads
            live = list(range(len(index)))  # batch rows still decoding
            limits = [min(max_len, 3 * int(n)) for n in X_len]
            valid = X_len
            self_kv = [None] * len(dec.blks)
            tok = torch.full((len(index), 1), BOS)
            hyps = [[] for _ in index]
            for t in range(max(limits)):
                logits = decode_step(dec, tok, t, self_kv, cross_kv,
                                     torch.repeat_interleave(valid, heads))
                nxt = logits[:, -1, :].argmax(dim=1)
                keep = []
                for r, v in enumerate(nxt.tolist()):
                    b = live[r]
                    if v != EOS:
                        hyps[b].append(v)
                    if v != EOS and t + 1 < limits[b]:
                        keep.append(r)
                if not keep:
                    break
                if len(keep) < len(live):  # the finished rows leave the batch
                    rows = torch.tensor(keep)
                    head_rows = (rows[:, None] * heads + torch.arange(heads)[None, :]).reshape(-1)
                    self_kv = [(k[head_rows], v[head_rows]) for k, v in self_kv]
                    cross_kv = [(k[head_rows], v[head_rows]) for k, v in cross_kv]
                    valid, nxt = valid[rows], nxt[rows]
                    live = [live[r] for r in keep]
                tok = nxt[:, None]
            for b, i in enumerate(index):
                out[i] = hyps[b]
    return out


def bleu(attn, sp, hyp_ids, refs, work, name):
    hyp = os.path.join(work, name + ".hyp")
    ref = os.path.join(work, name + ".ref")
    with open(hyp, "w", encoding="utf-8") as f:
        f.writelines(sp.decode(h) + "\n" for h in hyp_ids)
    with open(ref, "w", encoding="utf-8") as f:
        f.writelines(r + "\n" for r in refs)
    r = subprocess.run([attn, "bleu", ref, "-i", hyp, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"attn bleu failed: {r.stderr.strip()}")
    return json.loads(r.stdout)["bleu"]["score"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the model directory of an attn run (with data/)")
    ap.add_argument("--attn", required=True, help="the attn executable (for 'attn bleu')")
    ap.add_argument("--out", required=True, help="where to write validations.json and result.json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--minutes", type=float, default=None,
                    help="wall time of training with validation (default: the recipe's time_limit)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(a.threads)
    with open(os.path.join(a.model, "training.json")) as f:
        rec = json.load(f)
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    if unsupported_positions(cfg):
        sys.exit(f"tatoeba_transformer: {a.model}: {unsupported_positions(cfg)}")
    minutes = a.minutes if a.minutes is not None else rec["time_limit"]
    sp = spm.SentencePieceProcessor(model_file=os.path.join(a.model, "spm.model"))
    assert [sp.id_to_piece(i) for i in range(4)] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    train, _, dropped = encode_pairs(sp, read_tsv(os.path.join(a.model, "data", "train.tsv")),
                                     rec["max_length"])
    valid_text = read_tsv(os.path.join(a.model, "data", "valid.tsv"))
    test_text = read_tsv(os.path.join(a.model, "data", "test.tsv"))
    max_len = cfg["max_len"]
    # Validation pairs the model cannot read are left out, as attn does.
    valid_ids, valid_text, _ = encode_pairs(sp, valid_text, max_len)

    torch.manual_seed(rec["seed"])
    V = sp.get_piece_size()
    net = transformer("0.17", V, V, cfg["num_hiddens"], cfg["ffn_num_hiddens"], cfg["num_heads"],
                      cfg["num_layers"], cfg["dropout"], cfg["use_bias"], max_len,
                      cfg.get("positions", "sinusoidal"))
    xavier_init(net)
    if rec.get("embedding_init", "normal") == "scaled":
        for m in net.modules():
            if isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, 0.0, cfg["num_hiddens"] ** -0.5)
    opt = torch.optim.Adam(net.parameters(), lr=rec["lr"],
                           betas=(rec["adam_beta1"], rec["adam_beta2"]), eps=rec["adam_eps"])
    batches = token_batches(train, rec["batch_tokens"], rec["seed"])
    shuffle = random.Random(rec["seed"] + 1)
    print(f"peer: {len(train)} training pairs ({dropped} longer than {rec['max_length']} dropped), "
          f"{len(batches)} batches of <= {rec['batch_tokens']} tokens, {len(valid_text)} validation "
          f"and {len(test_text)} test pairs; {sum(p.numel() for p in net.parameters())} parameters; "
          f"{a.threads} threads, {minutes} minutes", flush=True)

    diff = check_cached_decoder(net, valid_ids[:16])
    print(f"peer: cached greedy decoder checked against the whole-sequence decoder on 16 "
          f"validation pairs: logits within {diff:.1e}", flush=True)
    validations, best, best_state = [], None, None
    start = time.perf_counter()
    elapsed = lambda: time.perf_counter() - start  # noqa: E731

    def validate(step):
        nonlocal best, best_state
        loss = nll_per_token(net, valid_ids, rec["batch_tokens"])
        hyps = greedy(net, [s for s, _ in valid_ids], max_len)
        score = bleu(a.attn, sp, hyps, [t for _, t in valid_text], a.out, "valid")
        v = {"step": step, "minutes": elapsed() / 60, "loss": loss, "perplexity": math.exp(loss),
             "bleu": score}
        validations.append(v)
        if best is None or score > best["bleu"]:
            best, best_state = v, copy.deepcopy(net.state_dict())
        print(f"peer: step {step}, {v['minutes']:.1f} min: valid loss {loss:.4f}, ppl "
              f"{v['perplexity']:.2f}, BLEU {score:.2f}", flush=True)
        net.train()

    step, tokens, epoch, done = 0, 0, 0, False
    net.train()
    while not done:
        epoch += 1
        shuffle.shuffle(batches)
        for index in batches:
            X, X_len, Y, Y_len = make_batch(train, index)
            Y_hat = net(X, decoder_input(Y), X_len)
            mask = (torch.arange(Y.shape[1])[None, :] < Y_len[:, None]).float()
            ce = nn.functional.cross_entropy(Y_hat.permute(0, 2, 1), Y, reduction="none",
                                             label_smoothing=rec["label_smoothing"])
            n = int(Y_len.sum())
            loss = (ce * mask).sum() / n
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), rec["grad_clip"])
            step += 1
            for g in opt.param_groups:
                g["lr"] = scheduled_lr(rec["lr"], step, rec["lr_warmup"], rec["lr_schedule"])
            opt.step()
            tokens += n
            if rec["valid_freq"] > 0 and step % rec["valid_freq"] == 0:
                validate(step)
            if elapsed() >= 60 * minutes:
                done = True
                break
    train_seconds = elapsed()
    if not validations or validations[-1]["step"] != step:
        validate(step)
    with open(os.path.join(a.out, "validations.json"), "w") as f:
        json.dump(validations, f, indent=1)

    net.load_state_dict(best_state)
    test_ids, test_text, _ = encode_pairs(sp, test_text, max_len)
    test_bleu = bleu(a.attn, sp, greedy(net, [s for s, _ in test_ids], max_len),
                     [t for _, t in test_text], a.out, "test")
    result = {"steps": step, "epochs": epoch, "train_seconds": train_seconds,
              "target_tokens_per_s": tokens / train_seconds, "best": best,
              "test_bleu_greedy": test_bleu, "test_pairs": len(test_text), "threads": a.threads,
              "torch": torch.__version__,
              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    with open(os.path.join(a.out, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"peer: {step} steps in {train_seconds / 60:.1f} min "
          f"({result['target_tokens_per_s']:.0f} target tokens/s); best validation BLEU "
          f"{best['bleu']:.2f} at step {best['step']}; test BLEU (greedy) {test_bleu:.2f}")


if __name__ == "__main__":
    main()
