"""d2l's Transformer (section 10.7 of d2l 0.17, 11.7 of d2l 1.0), d2l 0.17's
RNN encoder-decoder with Bahdanau attention (section 10.4) and their data
pipeline in PyTorch, written for attn's peers and interop tests after the
structure of d2l's code: the same module names (so the same state_dict names,
which are attn's) and the same math. One copy, used by

  - tests/interop/d2l_import_test.py (trains both editions, exports, compares);
  - bench/peers/d2l_transformer.py (the toy run's speed peer);
  - bench/peers/tatoeba_transformer.py (the translator recipe's peer).

`edition` is "0.17" (every layer sized up front, nn.Linear) or "1.0" (sized by
the first call, nn.LazyLinear); where the editions differ in data handling,
each follows its own. Needs PyTorch (Debian: python3-torch).
"""
import math
from collections import Counter

import torch
from torch import nn

# ---- data, as each edition builds it ----


def preprocess(text):
    """d2l's preprocess_nmt / MTFraEng._preprocess (the same in both editions)."""
    text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
    return "".join(" " + c if i > 0 and c in ",.!?" and text[i - 1] != " " else c
                   for i, c in enumerate(text))


def tokenize(edition, text, max_examples=None):
    """0.17: tokenize_nmt (split(' ')); 1.0: _tokenize (<eos> appended, empty tokens dropped)."""
    src, tgt = [], []
    for i, line in enumerate(text.split("\n")):
        if max_examples and i > max_examples:
            break
        parts = line.split("\t")
        if len(parts) == 2:
            if edition == "0.17":
                src.append(parts[0].split(" "))
                tgt.append(parts[1].split(" "))
            else:
                src.append([t for t in f"{parts[0]} <eos>".split(" ") if t])
                tgt.append([t for t in f"{parts[1]} <eos>".split(" ") if t])
    return src, tgt


class Vocab:
    """0.17: <unk> and the reserved tokens first, then by frequency; 1.0: sorted."""

    def __init__(self, edition, lines, min_freq, reserved=()):
        tokens = [t for line in lines for t in line]
        freqs = sorted(Counter(tokens).items(), key=lambda x: x[1], reverse=True)
        if edition == "0.17":
            self.idx_to_token = ["<unk>"] + list(reserved)
            for tok, freq in freqs:
                if freq >= min_freq and tok not in self.idx_to_token:
                    self.idx_to_token.append(tok)
        else:
            self.idx_to_token = sorted(set(["<unk>"] + list(reserved)
                                           + [t for t, f in freqs if f >= min_freq]))
        self.token_to_idx = {t: i for i, t in enumerate(self.idx_to_token)}
        self.unk = self.token_to_idx["<unk>"]

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        return [self.token_to_idx.get(t, self.unk) for t in tokens]


def fit(seq, n, pad="<pad>"):
    return seq[:n] if len(seq) > n else seq + [pad] * (n - len(seq))


class Data:
    """The arrays and vocabularies of one edition: src (N, T), src_len, label
    (N, T) and label_len, the decoder's input being <bos> + label[:, :-1]."""

    def __init__(self, edition, src, tgt, num_steps, vocabs=None):
        self.edition, self.num_steps = edition, num_steps
        if edition == "0.17":  # load_data_nmt, build_array_nmt
            reserved = ["<pad>", "<bos>", "<eos>"]
            self.src_vocab, self.tgt_vocab = vocabs or (Vocab(edition, src, 2, reserved),
                                                        Vocab(edition, tgt, 2, reserved))
            src = [fit(s + ["<eos>"], num_steps) for s in src]
            tgt = [fit(t + ["<eos>"], num_steps) for t in tgt]
        else:  # MTFraEng._build_arrays: vocabularies of the padded sentences
            src = [fit(s, num_steps) for s in src]
            tgt = [fit(t, num_steps) for t in tgt]
            self.src_vocab, self.tgt_vocab = vocabs or (
                Vocab(edition, src, 2), Vocab(edition, [["<bos>"] + t for t in tgt], 2))
        self.src = torch.tensor([self.src_vocab[s] for s in src])
        self.label = torch.tensor([self.tgt_vocab[t] for t in tgt])
        self.src_len = (self.src != self.src_vocab.token_to_idx["<pad>"]).sum(1)
        self.label_len = (self.label != self.tgt_vocab.token_to_idx["<pad>"]).sum(1)
        self.bos = self.tgt_vocab.token_to_idx["<bos>"]

    def decoder_input(self, label):
        return torch.cat([torch.full((label.shape[0], 1), self.bos), label[:, :-1]], 1)


# ---- the model: d2l's Transformer structure ----

def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    valid_lens = (torch.repeat_interleave(valid_lens, shape[1]) if valid_lens.dim() == 1
                  else valid_lens.reshape(-1))
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
        return torch.bmm(self.dropout(masked_softmax(scores, valid_lens)), v)


def rotary(X, start=0):
    """attn's rotary positions (ops/positions.h) on X (..., T, D): row t at
    position start + t, each pair (X[2i], X[2i + 1]) turned by the angle
    position * 10000^(-2i / D), computed in float64 and rounded to X's type."""
    T, D = X.shape[-2], X.shape[-1]
    theta = torch.pow(10000.0, -torch.arange(0, D, 2, dtype=torch.float64) / D)
    angle = torch.arange(start, start + T, dtype=torch.float64)[:, None] * theta[None, :]
    c, s = torch.cos(angle).to(X.dtype), torch.sin(angle).to(X.dtype)
    x0, x1 = X[..., 0::2], X[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


def dense(edition, n_in, n_out, bias=True):
    """0.17 sizes every layer (nn.Linear); 1.0 lets the first call do it (nn.LazyLinear)."""
    return nn.Linear(n_in, n_out, bias=bias) if edition == "0.17" else nn.LazyLinear(n_out, bias=bias)


class MultiHeadAttention(nn.Module):
    def __init__(self, edition, hiddens, heads, dropout, bias=False):
        super().__init__()
        self.num_heads = heads
        # attn's --positions rotary: keys at 0..Tk-1, queries the last Tq of them.
        self.rotary = False
        self.attention = DotProductAttention(dropout)
        self.W_q, self.W_k, self.W_v, self.W_o = (dense(edition, hiddens, hiddens, bias)
                                                  for _ in range(4))

    def split(self, X):
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1).permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def forward(self, q, k, v, valid_lens):
        q, k, v = self.split(self.W_q(q)), self.split(self.W_k(k)), self.split(self.W_v(v))
        if self.rotary:
            q, k = rotary(q, k.shape[1] - q.shape[1]), rotary(k)
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        out = self.attention(q, k, v, valid_lens)
        out = out.reshape(-1, self.num_heads, out.shape[1], out.shape[2]).permute(0, 2, 1, 3)
        return self.W_o(out.reshape(out.shape[0], out.shape[1], -1))


class PositionWiseFFN(nn.Module):
    def __init__(self, edition, hiddens, ffn):
        super().__init__()
        self.dense1, self.relu, self.dense2 = dense(edition, hiddens, ffn), nn.ReLU(), dense(edition, ffn, hiddens)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):
    def __init__(self, hiddens, dropout):
        super().__init__()
        self.dropout, self.ln = nn.Dropout(dropout), nn.LayerNorm(hiddens)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class PositionalEncoding(nn.Module):
    def __init__(self, hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = torch.zeros((1, max_len, hiddens))
        X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
            10000, torch.arange(0, hiddens, 2, dtype=torch.float32) / hiddens)
        self.P[:, :, 0::2], self.P[:, :, 1::2] = torch.sin(X), torch.cos(X)
        self.rotary = False

    def forward(self, X, offset=0):
        """`offset`: the position of X's first row (0 in d2l; a decoding step's t)."""
        if self.rotary:  # positions in the attention: nothing added
            return self.dropout(X)
        return self.dropout(X + self.P[:, offset:offset + X.shape[1], :])


class EncoderBlock(nn.Module):
    def __init__(self, edition, hiddens, ffn, heads, dropout, use_bias=False):
        super().__init__()
        self.attention = MultiHeadAttention(edition, hiddens, heads, dropout, use_bias)
        self.addnorm1, self.ffn = AddNorm(hiddens, dropout), PositionWiseFFN(edition, hiddens, ffn)
        self.addnorm2 = AddNorm(hiddens, dropout)

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class DecoderBlock(nn.Module):
    def __init__(self, edition, hiddens, ffn, heads, dropout, i):
        super().__init__()
        self.i = i
        self.attention1, self.addnorm1 = MultiHeadAttention(edition, hiddens, heads, dropout), AddNorm(hiddens, dropout)
        self.attention2, self.addnorm2 = MultiHeadAttention(edition, hiddens, heads, dropout), AddNorm(hiddens, dropout)
        self.ffn, self.addnorm3 = PositionWiseFFN(edition, hiddens, ffn), AddNorm(hiddens, dropout)

    def forward(self, X, state):
        enc_outputs, enc_valid_lens = state[0], state[1]
        key_values = X if state[2][self.i] is None else torch.cat((state[2][self.i], X), dim=1)
        state[2][self.i] = key_values
        # d2l: the causal mask only in training mode (predict feeds one token at a time).
        dec_valid_lens = (torch.arange(1, X.shape[1] + 1).repeat(X.shape[0], 1)
                          if self.training else None)
        Y = self.addnorm1(X, self.attention1(X, key_values, key_values, dec_valid_lens))
        Z = self.addnorm2(Y, self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens))
        return self.addnorm3(Z, self.ffn(Z)), state


class TransformerEncoder(nn.Module):
    def __init__(self, edition, vocab, hiddens, ffn, heads, layers, dropout, use_bias=False,
                 max_len=1000):
        super().__init__()
        self.num_hiddens = hiddens
        self.embedding = nn.Embedding(vocab, hiddens)
        self.pos_encoding = PositionalEncoding(hiddens, dropout, max_len)
        self.blks = nn.Sequential()
        for i in range(layers):
            self.blks.add_module("block" + str(i),
                                 EncoderBlock(edition, hiddens, ffn, heads, dropout, use_bias))

    def forward(self, X, valid_lens):
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        for blk in self.blks:
            X = blk(X, valid_lens)
        return X


class TransformerDecoder(nn.Module):
    def __init__(self, edition, vocab, hiddens, ffn, heads, layers, dropout, max_len=1000):
        super().__init__()
        self.num_hiddens, self.num_layers = hiddens, layers
        self.embedding = nn.Embedding(vocab, hiddens)
        self.pos_encoding = PositionalEncoding(hiddens, dropout, max_len)
        self.blks = nn.Sequential()
        for i in range(layers):
            self.blks.add_module("block" + str(i),
                                 DecoderBlock(edition, hiddens, ffn, heads, dropout, i))
        self.dense = dense(edition, hiddens, vocab)

    def init_state(self, enc_outputs, enc_valid_lens):
        return [enc_outputs, enc_valid_lens, [None] * self.num_layers]

    def forward(self, X, state, offset=0):
        """`offset`: X's first position. d2l always adds position 0's encoding;
        a decoder fed one token at a time (eval mode, keys and values cached
        in state[2]) gives the t-th token position t, as attn does."""
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens), offset)
        for blk in self.blks:
            X, state = blk(X, state)
        return self.dense(X), state


class EncoderDecoder(nn.Module):
    """d2l 0.17's EncoderDecoder; d2l 1.0's Seq2Seq holds the same two children."""

    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, enc_X, dec_X, enc_valid_len):
        enc = self.encoder(enc_X, enc_valid_len)
        return self.decoder(dec_X, self.decoder.init_state(enc, enc_valid_len))[0]


def transformer(edition, src_vocab, tgt_vocab, hiddens, ffn, heads, layers, dropout,
                use_bias=False, max_len=1000, positions="sinusoidal"):
    """d2l's Transformer: an encoder and a decoder of `layers` blocks each.
    positions="rotary" is attn's --positions rotary: nothing added to the
    embeddings, queries and keys of every self-attention turned instead."""
    assert positions in ("sinusoidal", "rotary"), positions
    net = EncoderDecoder(
        TransformerEncoder(edition, src_vocab, hiddens, ffn, heads, layers, dropout, use_bias,
                           max_len),
        TransformerDecoder(edition, tgt_vocab, hiddens, ffn, heads, layers, dropout, max_len))
    if positions == "rotary":
        net.encoder.pos_encoding.rotary = net.decoder.pos_encoding.rotary = True
        for blk in net.encoder.blks:
            blk.attention.rotary = True
        for blk in net.decoder.blks:
            blk.attention1.rotary = True
    return net


def unsupported_positions(cfg):
    """Why an attn config.json is not a Transformer `transformer` builds (its
    positions are neither the added sinusoids nor rotary, or its keys and
    values have fewer heads than its queries), or None when it is."""
    positions = cfg.get("positions", "sinusoidal")
    kv_heads = cfg.get("num_kv_heads", 0) or cfg["num_heads"]
    if positions not in ("sinusoidal", "rotary") or kv_heads != cfg["num_heads"]:
        return (f"--positions {positions}, --num-kv-heads {kv_heads}: only sinusoidal or rotary "
                f"positions with full key/value heads are built here")
    return None


# ---- d2l 0.17's RNN encoder-decoder with Bahdanau attention (10.4) ----

class AdditiveAttention(nn.Module):
    def __init__(self, key_size, query_size, hiddens, dropout):
        super().__init__()
        self.W_k = nn.Linear(key_size, hiddens, bias=False)
        self.W_q = nn.Linear(query_size, hiddens, bias=False)
        self.w_v = nn.Linear(hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        queries, keys = self.W_q(queries), self.W_k(keys)
        features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))
        scores = self.w_v(features).squeeze(-1)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


class Seq2SeqEncoder(nn.Module):
    def __init__(self, vocab, embed, hiddens, layers, dropout=0):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.rnn = nn.GRU(embed, hiddens, layers, dropout=dropout)

    def forward(self, X, *args):
        return self.rnn(self.embedding(X).permute(1, 0, 2))  # outputs (T, B, H), state (L, B, H)


class Seq2SeqAttentionDecoder(nn.Module):
    def __init__(self, vocab, embed, hiddens, layers, dropout=0):
        super().__init__()
        self.attention = AdditiveAttention(hiddens, hiddens, hiddens, dropout)
        self.embedding = nn.Embedding(vocab, embed)
        self.rnn = nn.GRU(embed + hiddens, hiddens, layers, dropout=dropout)
        self.dense = nn.Linear(hiddens, vocab)

    def init_state(self, enc_outputs, enc_valid_lens, *args):
        outputs, hidden_state = enc_outputs
        return (outputs.permute(1, 0, 2), hidden_state, enc_valid_lens)

    def forward(self, X, state):
        enc_outputs, hidden_state, enc_valid_lens = state
        outputs = []
        for x in self.embedding(X).permute(1, 0, 2):
            query = hidden_state[-1].unsqueeze(1)  # (B, 1, H)
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
            x = torch.cat((context, x.unsqueeze(1)), dim=-1)
            out, hidden_state = self.rnn(x.permute(1, 0, 2), hidden_state)
            outputs.append(out)
        outputs = self.dense(torch.cat(outputs, dim=0))
        return outputs.permute(1, 0, 2), [enc_outputs, hidden_state, enc_valid_lens]


def bahdanau(src_vocab, tgt_vocab, embed, hiddens, layers, dropout):
    """d2l 0.17's EncoderDecoder(Seq2SeqEncoder, Seq2SeqAttentionDecoder)."""
    return EncoderDecoder(Seq2SeqEncoder(src_vocab, embed, hiddens, layers, dropout),
                          Seq2SeqAttentionDecoder(tgt_vocab, embed, hiddens, layers, dropout))


def xavier_init(net):
    """d2l 0.17's train_seq2seq (xavier_init_weights): xavier_uniform_ on every
    nn.Linear weight and on every nn.GRU weight matrix."""
    for m in net.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
        if isinstance(m, nn.GRU):
            for name in m._flat_weights_names:
                if "weight" in name:
                    nn.init.xavier_uniform_(m._parameters[name])


def inference_mode(net):
    """Training mode (d2l's decoder masks causally only then) with dropout off:
    the whole target sequence at once, as attn's decoder always treats it.
    (An nn.GRU drops out between its layers in training mode: it is put in
    eval mode too.)"""
    net.train()
    for m in net.modules():
        if isinstance(m, (nn.Dropout, nn.GRU)):
            m.eval()


# ---- decoding one token at a time with a KV cache ----

class CachedDecoder:
    """d2l's TransformerDecoder (eval mode, no dropout) fed one token per
    sentence row at a time, keeping each layer's projected self-attention
    keys and values of the earlier steps (the KV cache) and projecting the
    encoder's outputs for the cross-attention once. Same math as the
    whole-sequence decoder with its causal mask; the t-th input (<bos> at 0)
    sits at position t, as attn places it.

    Each sentence has `n` consecutive rows (its beams; 1 for greedy), all at
    the same step; the cross-attention cache is kept once per sentence and the
    rows of a sentence query it together. The queries, keys and values of the
    self-attention are one product (W_q, W_k and W_v stacked), as are the
    encoder side's keys and values.

        cache = CachedDecoder(net.decoder)
        state = cache.begin(net.encoder(X, X_len), X_len)
        logits = cache.step(tokens, t, state)       # (rows, vocab)
        cache.select(state, rows, sentences)         # beams pruned, sentences gone
    """

    def __init__(self, decoder):
        self.dec = decoder
        self.heads = decoder.blks[0].attention1.num_heads
        self.scale = decoder.num_hiddens ** 0.5

        def stack(*linears):
            w = torch.cat([m.weight.detach() for m in linears])
            if all(m.bias is None for m in linears):
                return w, None
            return w, torch.cat([torch.zeros(m.out_features) if m.bias is None else m.bias.detach()
                                 for m in linears])

        self.qkv = [stack(b.attention1.W_q, b.attention1.W_k, b.attention1.W_v) for b in decoder.blks]
        self.kv2 = [stack(b.attention2.W_k, b.attention2.W_v) for b in decoder.blks]

    def _heads(self, X):
        """(rows, steps, d) -> (rows, heads, steps, d / heads)"""
        return X.reshape(X.shape[0], X.shape[1], self.heads, -1).transpose(1, 2)

    def begin(self, enc_outputs, valid_lens):
        """The state of a batch of sentences: the encoder's keys and values per
        layer, the mask of their padding, no cached steps, one row each."""
        cross = []
        for w, b in self.kv2:
            k, v = nn.functional.linear(enc_outputs, w, b).chunk(2, dim=-1)
            cross.append((self._heads(k).contiguous(), self._heads(v).contiguous()))
        Ts = enc_outputs.shape[1]
        pad = torch.arange(Ts)[None, :] >= valid_lens[:, None]
        bias = torch.zeros(pad.shape).masked_fill_(pad, float("-inf"))[:, None, None, :]
        return {"cross": cross, "bias": bias, "self": [None] * len(self.qkv), "n": 1}

    def step(self, tokens, t, state):
        """tokens (rows,) at position t: the logits of the next token (rows, vocab)."""
        dec, H, n = self.dec, self.heads, state["n"]
        X = dec.embedding(tokens) * self.scale
        if not dec.pos_encoding.rotary:
            X = X + dec.pos_encoding.P[0, t]
        R, d = X.shape
        S = R // n
        for i, blk in enumerate(dec.blks):
            q, k, v = nn.functional.linear(X, *self.qkv[i]).reshape(R, 3, H, 1, d // H).unbind(1)
            if blk.attention1.rotary:  # the cache keeps keys turned
                q, k = rotary(q, t), rotary(k, t)
            if state["self"][i] is not None:
                k = torch.cat([state["self"][i][0], k], 2)
                v = torch.cat([state["self"][i][1], v], 2)
            state["self"][i] = (k, v)
            w = torch.softmax(torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d // H), dim=-1)
            a = blk.attention1.W_o(torch.matmul(w, v).reshape(R, d))
            Y = blk.addnorm1.ln(X + a)
            a2 = blk.attention2
            q2 = a2.W_q(Y).reshape(S, n, H, d // H).transpose(1, 2)  # (S, H, n, d / H)
            k2, v2 = state["cross"][i]
            w2 = torch.softmax(torch.matmul(q2, k2.transpose(2, 3)) / math.sqrt(d // H)
                               + state["bias"], dim=-1)
            a = a2.W_o(torch.matmul(w2, v2).transpose(1, 2).reshape(R, d))
            Z = blk.addnorm2.ln(Y + a)
            X = blk.addnorm3.ln(Z + blk.ffn(Z))
        return dec.dense(X)

    def select(self, state, rows, sentences=None, n=None):
        """Keeps the cached steps of `rows` (an index tensor, in their new
        order: beams that continue another row take over its cache) and, if
        given, the encoder side of `sentences` only (those still decoding, in
        order); `n`: rows per sentence from now on."""
        state["self"] = [None if c is None else (c[0].index_select(0, rows), c[1].index_select(0, rows))
                         for c in state["self"]]
        if sentences is not None:
            state["cross"] = [(k.index_select(0, sentences), v.index_select(0, sentences))
                              for k, v in state["cross"]]
            state["bias"] = state["bias"].index_select(0, sentences)
        if n is not None:
            state["n"] = n
