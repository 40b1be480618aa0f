#!/usr/bin/env python3
"""Export a Transformer or a Bahdanau model trained with d2l's PyTorch code into an attn model directory.

Works for the models of d2l 0.17 (section 10.7: EncoderBlock, DecoderBlock,
d2l.EncoderDecoder) and of d2l 1.0 (section 11.7: TransformerEncoderBlock,
TransformerDecoderBlock, d2l.Seq2Seq): both name their parameters alike
(encoder.blks.block0.attention.W_q.weight, ...), which are attn's names. The
vocabularies are written in their own order: d2l 0.17 puts <unk> first, d2l
1.0 sorts its tokens (so <unk> lands at, e.g., index 6); the vocabulary file
says where, and attn maps unknown words there, so no embedding row moves.
The RNN encoder-decoder with Bahdanau attention of d2l 0.17 (section 10.4:
Seq2SeqEncoder, Seq2SeqAttentionDecoder, their nn.GRU parameters) is
recognized by its encoder.rnn.* tensors and exported as attn's "bahdanau"
architecture (--num-heads is then ignored).

From Python, where the model lives (d2l 1.0: `model`, `data.src_vocab`, ...):

    import sys; sys.path.insert(0, "ATTN/tools")
    from export_d2l import export
    export(model, data.src_vocab, data.tgt_vocab, "model-dir", num_heads=4,
           num_steps=data.num_steps)

From the command line, with the model saved by
    torch.save({"state_dict": net.state_dict(),
                "src_vocab": src_vocab.idx_to_token,
                "tgt_vocab": tgt_vocab.idx_to_token}, "d2l.pt")

    /usr/bin/python3 tools/export_d2l.py d2l.pt model-dir --num-heads 4 --num-steps 10

The directory gets config.json, model.safetensors (F32), src_vocab.txt,
tgt_vocab.txt and manifest.json (the size and SHA-256 of each), which is
what `attn translate --model model-dir` reads (docs/model-format.md). The
number of heads and num_steps cannot be read off the weights: give them.
Needs PyTorch (Debian: python3-torch) and nothing else.
"""
import argparse
import hashlib
import json
import os
import re
import struct
import sys

import torch

FILES = ["config.json", "model.safetensors", "src_vocab.txt", "tgt_vocab.txt"]
SOURCE_TOKENS = ["<unk>", "<pad>", "<eos>"]  # d2l 1.0's source vocabulary has no <bos>
TARGET_TOKENS = ["<unk>", "<pad>", "<bos>", "<eos>"]


class ExportError(Exception):
    """A model or vocabulary attn cannot take, with the reason."""


def expected_shapes(src_vocab, tgt_vocab, hiddens, layers, ffn, use_bias):
    """The name and shape of every parameter of attn's EncoderDecoder, which
    are those of d2l's state_dict (nn::transformer_parameter_shapes)."""
    shapes = {}

    def linear(name, n_in, n_out, bias):
        shapes[name + ".weight"] = (n_out, n_in)
        if bias:
            shapes[name + ".bias"] = (n_out,)

    def attention(name, bias):
        for w in ("W_q", "W_k", "W_v", "W_o"):
            linear(f"{name}.{w}", hiddens, hiddens, bias)

    def addnorm(name):
        shapes[name + ".ln.weight"] = (hiddens,)
        shapes[name + ".ln.bias"] = (hiddens,)

    def ffn_(name):
        linear(name + ".dense1", hiddens, ffn, True)
        linear(name + ".dense2", ffn, hiddens, True)

    shapes["encoder.embedding.weight"] = (src_vocab, hiddens)
    for i in range(layers):
        b = f"encoder.blks.block{i}"
        attention(b + ".attention", use_bias)
        addnorm(b + ".addnorm1")
        ffn_(b + ".ffn")
        addnorm(b + ".addnorm2")
    shapes["decoder.embedding.weight"] = (tgt_vocab, hiddens)
    for i in range(layers):
        b = f"decoder.blks.block{i}"
        attention(b + ".attention1", False)
        addnorm(b + ".addnorm1")
        attention(b + ".attention2", False)
        addnorm(b + ".addnorm2")
        ffn_(b + ".ffn")
        addnorm(b + ".addnorm3")
    linear("decoder.dense", hiddens, tgt_vocab, True)
    return shapes


def tensors_of(model):
    """name -> float32 CPU tensor, from a module or a state_dict."""
    state = model.state_dict() if hasattr(model, "state_dict") else model
    if not isinstance(state, dict):
        raise ExportError(f"expected a model or a state_dict, got {type(state).__name__}")
    out = {}
    for name, t in state.items():
        if isinstance(t, torch.nn.parameter.UninitializedParameter):
            raise ExportError(f"parameter '{name}' is not initialized yet (d2l 1.0's LazyLinear "
                              "gets its shape in the first forward pass): train or run the model "
                              "once before exporting it")
        if not torch.is_tensor(t):
            raise ExportError(f"'{name}' in the state_dict is a {type(t).__name__}, not a tensor")
        if not t.is_floating_point():
            raise ExportError(f"tensor '{name}' is {t.dtype}, not floating point")
        t = t.detach().to("cpu", torch.float32).contiguous()
        if not torch.isfinite(t).all():
            raise ExportError(f"tensor '{name}' holds NaN or infinity: the model diverged")
        out[name] = t
    return out


def bahdanau_shapes(src_vocab, tgt_vocab, embed, hiddens, layers):
    """The parameters of d2l 0.17's Seq2SeqEncoder + Seq2SeqAttentionDecoder
    (nn::bahdanau_parameter_shapes)."""
    shapes = {"encoder.embedding.weight": (src_vocab, embed),
              "decoder.attention.W_k.weight": (hiddens, hiddens),
              "decoder.attention.W_q.weight": (hiddens, hiddens),
              "decoder.attention.w_v.weight": (1, hiddens),
              "decoder.embedding.weight": (tgt_vocab, embed),
              "decoder.dense.weight": (tgt_vocab, hiddens),
              "decoder.dense.bias": (tgt_vocab,)}
    for part, n_in in (("encoder", embed), ("decoder", embed + hiddens)):
        for k in range(layers):
            shapes[f"{part}.rnn.weight_ih_l{k}"] = (3 * hiddens, n_in if k == 0 else hiddens)
            shapes[f"{part}.rnn.weight_hh_l{k}"] = (3 * hiddens, hiddens)
            shapes[f"{part}.rnn.bias_ih_l{k}"] = (3 * hiddens,)
            shapes[f"{part}.rnn.bias_hh_l{k}"] = (3 * hiddens,)
    return shapes


def bahdanau_config(tensors, num_steps, dropout, max_len):
    src_vocab, embed = tensors["encoder.embedding.weight"].shape
    need = ("decoder.embedding.weight", "encoder.rnn.weight_hh_l0")
    for name in need:
        if name not in tensors:
            raise ExportError(f"tensor '{name}' is missing: not a model of d2l's "
                              "Seq2SeqEncoder and Seq2SeqAttentionDecoder (10.4)?")
    tgt_vocab = tensors["decoder.embedding.weight"].shape[0]
    hiddens = tensors["encoder.rnn.weight_hh_l0"].shape[1]
    layers = len([n for n in tensors if re.fullmatch(r"encoder\.rnn\.weight_ih_l\d+", n)])
    if not 2 <= num_steps <= max_len:
        raise ExportError(f"num_steps {num_steps} must be in [2, max_len = {max_len}]")
    want = bahdanau_shapes(src_vocab, tgt_vocab, embed, hiddens, layers)
    for name, shape in want.items():
        if name not in tensors:
            raise ExportError(f"tensor '{name}' is missing (a Bahdanau model of {layers} layers "
                              "has it)")
        if tuple(tensors[name].shape) != shape:
            raise ExportError(f"tensor '{name}' has shape {list(tensors[name].shape)}, but a "
                              f"model with embed_size {embed} and num_hiddens {hiddens} needs "
                              f"{list(shape)}")
    extra = sorted(set(tensors) - set(want))
    if extra:
        raise ExportError(f"tensor '{extra[0]}' is not a parameter of d2l's Bahdanau model"
                          + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""))
    return {"format": "attn-transformer", "format_version": 1, "architecture": "bahdanau",
            "src_vocab_size": src_vocab, "tgt_vocab_size": tgt_vocab,
            "num_hiddens": hiddens, "num_layers": layers, "num_heads": 1,
            "ffn_num_hiddens": 1, "dropout": dropout, "max_len": max_len,
            "use_bias": False, "embed_size": embed, "num_steps": num_steps}


def model_config(tensors, num_heads, num_steps, dropout, max_len):
    """config.json's keys, read off the weights where they show."""
    if "encoder.rnn.weight_ih_l0" in tensors and "encoder.embedding.weight" in tensors:
        return bahdanau_config(tensors, num_steps, dropout, max_len)
    def need(name):
        if name not in tensors:
            raise ExportError(f"tensor '{name}' is missing: not a model of d2l's "
                              "Transformer (10.7 in d2l 0.17, 11.7 in d2l 1.0)?")
        return tensors[name]

    src_vocab, hiddens = need("encoder.embedding.weight").shape
    tgt_vocab = need("decoder.embedding.weight").shape[0]
    layers = len({m.group(1) for n in tensors
                  if (m := re.match(r"encoder\.blks\.block(\d+)\.", n))})
    ffn = need("encoder.blks.block0.ffn.dense1.weight").shape[0]
    use_bias = "encoder.blks.block0.attention.W_q.bias" in tensors
    if num_heads < 1 or hiddens % num_heads:
        raise ExportError(f"num_hiddens {hiddens} is not divisible by --num-heads {num_heads}")
    if not 2 <= num_steps <= max_len:
        raise ExportError(f"num_steps {num_steps} must be in [2, max_len = {max_len}]")
    want = expected_shapes(src_vocab, tgt_vocab, hiddens, layers, ffn, use_bias)
    for name, shape in want.items():
        if tuple(need(name).shape) != shape:
            raise ExportError(f"tensor '{name}' has shape {list(tensors[name].shape)}, but a "
                              f"model with num_hiddens {hiddens} and ffn_num_hiddens {ffn} "
                              f"needs {list(shape)} (attn takes key, query and value sizes "
                              "equal to num_hiddens, as d2l's Transformer does)")
    extra = sorted(set(tensors) - set(want))
    if extra:
        raise ExportError(f"tensor '{extra[0]}' is not a parameter of d2l's Transformer"
                          + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""))
    return {"format": "attn-transformer", "format_version": 1,
            "src_vocab_size": src_vocab, "tgt_vocab_size": tgt_vocab,
            "num_hiddens": hiddens, "num_layers": layers, "num_heads": num_heads,
            "ffn_num_hiddens": ffn, "dropout": dropout, "max_len": max_len,
            "use_bias": use_bias, "num_steps": num_steps}


def tokens_of(vocab, what, size, required):
    """The vocabulary's tokens in index order: a d2l Vocab (either edition) or a list."""
    tokens = list(vocab.idx_to_token if hasattr(vocab, "idx_to_token") else vocab)
    for i, t in enumerate(tokens):
        if not isinstance(t, str):
            raise ExportError(f"{what}: token {i} is a {type(t).__name__}, not a string")
        if "\n" in t:
            raise ExportError(f"{what}: token {i} holds a newline")
    if len(set(tokens)) != len(tokens):
        dup = next(t for i, t in enumerate(tokens) if t in tokens[:i])
        raise ExportError(f"{what}: token '{dup}' appears twice")
    for t in required:
        if t not in tokens:
            raise ExportError(f"{what}: the token {t} is missing")
    if len(tokens) != size:
        raise ExportError(f"{what} has {len(tokens)} tokens but the embedding has {size} rows: "
                          "is it the vocabulary this model was trained with?")
    return tokens


def safetensors_bytes(tensors):
    """The safetensors encoding: header length, JSON header, then the data,
    tensors in name order, F32 little-endian."""
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name in sorted(tensors):
        data = tensors[name].numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_atomic(path, data):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def export(model, src_vocab, tgt_vocab, out_dir, num_heads, num_steps, dropout=0.1,
           max_len=1000, overwrite=False):
    """Writes `model` (a d2l Transformer or its state_dict) and its vocabularies
    (d2l Vocab objects or token lists in index order) as an attn model
    directory. Returns the config written. Raises ExportError."""
    tensors = tensors_of(model)
    config = model_config(tensors, num_heads, num_steps, dropout, max_len)
    src = tokens_of(src_vocab, "the source vocabulary", config["src_vocab_size"], SOURCE_TOKENS)
    tgt = tokens_of(tgt_vocab, "the target vocabulary", config["tgt_vocab_size"], TARGET_TOKENS)
    if os.path.exists(out_dir):
        if not os.path.isdir(out_dir):
            raise ExportError(f"'{out_dir}' exists and is not a directory")
        if os.listdir(out_dir) and not overwrite:
            raise ExportError(f"'{out_dir}' is not empty; it is not replaced unasked "
                              "(--overwrite)")
    os.makedirs(out_dir, exist_ok=True)
    contents = {
        "config.json": (json.dumps(config, indent=2) + "\n").encode(),
        "model.safetensors": safetensors_bytes(tensors),
        "src_vocab.txt": "".join(t + "\n" for t in src).encode(),
        "tgt_vocab.txt": "".join(t + "\n" for t in tgt).encode(),
    }
    # The manifest last: until it is written, attn refuses the directory.
    manifest = os.path.join(out_dir, "manifest.json")
    if os.path.exists(manifest):
        os.remove(manifest)
    for name in FILES:
        write_atomic(os.path.join(out_dir, name), contents[name])
    files = [{"name": n, "bytes": len(contents[n]), "sha256": hashlib.sha256(contents[n]).hexdigest()}
             for n in FILES]
    write_atomic(manifest, (json.dumps({"format": "attn-manifest", "format_version": 1,
                                        "kind": "attn-model", "files": files}, indent=2)
                            + "\n").encode())
    return config


def read_token_file(path):
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    if text and not text.endswith("\n"):
        raise ExportError(f"'{path}': the last line has no newline")
    return text.split("\n")[:-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="torch.save'd dict with 'state_dict' (and 'src_vocab', "
                   "'tgt_vocab': token lists), or a bare state_dict")
    p.add_argument("out", help="the model directory to write")
    p.add_argument("--num-heads", type=int, required=True,
                   help="attention heads of a Transformer (a Bahdanau model ignores it)")
    p.add_argument("--num-steps", type=int, required=True,
                   help="the length sentences were cut or padded to (d2l 0.17: 10, d2l 1.0: 9)")
    p.add_argument("--src-vocab", help="source tokens, one per line (when not in the checkpoint)")
    p.add_argument("--tgt-vocab", help="target tokens, one per line (when not in the checkpoint)")
    p.add_argument("--dropout", type=float, default=0.1, help="recorded in config.json")
    p.add_argument("--max-len", type=int, default=1000,
                   help="positions of the positional encoding (d2l: 1000)")
    p.add_argument("--overwrite", action="store_true", help="replace what OUT holds")
    a = p.parse_args()
    try:
        try:  # tensors, dicts, lists and strings only: no code runs while loading
            saved = torch.load(a.checkpoint, map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises many kinds for a file it cannot read
            raise ExportError(f"cannot read '{a.checkpoint}': {str(e).splitlines()[0]}")
        is_bundle = isinstance(saved, dict) and "state_dict" in saved
        state = saved["state_dict"] if is_bundle else saved
        vocabs = []
        for key, path in (("src_vocab", a.src_vocab), ("tgt_vocab", a.tgt_vocab)):
            if path:
                vocabs.append(read_token_file(path))
            elif is_bundle and key in saved:
                vocabs.append(saved[key])
            else:
                raise ExportError(f"no {key}: give --{key.replace('_', '-')} FILE or save it "
                                  "in the checkpoint")
        config = export(state, vocabs[0], vocabs[1], a.out, a.num_heads, a.num_steps,
                        a.dropout, a.max_len, a.overwrite)
    except (ExportError, OSError) as e:
        print(f"export_d2l: error: {e}", file=sys.stderr)
        return 1
    unk = [list(v).index("<unk>") for v in vocabs]
    kind = (f"a Bahdanau model, embed_size {config['embed_size']}"
            if config.get("architecture") == "bahdanau" else f"{config['num_heads']} heads")
    print(f"wrote {a.out}: {config['num_layers']} layers, num_hiddens {config['num_hiddens']}, "
          f"{kind}, vocabularies {config['src_vocab_size']} / "
          f"{config['tgt_vocab_size']} (<unk> at {unk[0]} / {unk[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
