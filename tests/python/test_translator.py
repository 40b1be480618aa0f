"""attn.Translator and attn.evaluate against the attn program on the same
models (trained by `attn train` in the set-up, make_models.py): the same
translations byte for byte, the same n-best lists and scores as printed,
the same attention weights as `attn attention --json`, the same evaluation
as `attn evaluate --json`."""
import json
import os

import numpy as np
import pytest

import attn
from conftest import run_cli

WORD_SENTENCES = ["go .", "i lost .", "he's calm .", "i'm home .", "", "Hello, World!",
                  "this sentence has far more words than the model's ten steps ever saw ."]


def spm_sources(models, n=None):
    with open(os.path.join(models["spm"], "data", "test.tsv"), encoding="utf-8") as f:
        sources = [line.split("\t")[0] for line in f.read().splitlines()]
    return sources[:n] + ["", "I'm home."] if n else sources + ["", "I'm home."]


def cli_lines(model, sentences, *flags, threads):
    return run_cli("--threads", str(threads), "translate", "--model", model, *flags,
                   stdin="".join(s + "\n" for s in sentences)).splitlines()


def n_best_lines(results):
    return [f"{i} ||| {h.text} ||| {h.score:.6f}" for i, hyps in enumerate(results)
            for h in hyps]


def test_word_model_translates_as_the_cli(models):
    tr = attn.Translator(models["word"], threads=1)
    with pytest.warns(UserWarning, match="sentence 7 has more than the model's num_steps 10"):
        got = tr.translate(WORD_SENTENCES)
    assert got == cli_lines(models["word"], WORD_SENTENCES, threads=1)
    assert got[4] == ""
    with pytest.warns(UserWarning):
        hyps = tr.translate(WORD_SENTENCES, beam_size=3, n_best=2)
    assert n_best_lines(hyps) == cli_lines(models["word"], WORD_SENTENCES, "--beam-size", "3",
                                           "--n-best", "2", threads=1)
    assert all(len(h) == 2 for h in hyps[:4])
    assert hyps[0][0].tokens == hyps[0][0].text.split()


@pytest.mark.parametrize("flags", [{}, {"beam_size": 1}, {"beam_size": 2, "length_penalty": 1.0},
                                   {"max_length": 5}, {"max_batch_size": 3, "inter_threads": 2}])
def test_subword_model_translates_as_the_cli(models, flags):
    sources = spm_sources(models)
    cli_flags = []
    for k, v in flags.items():
        cli_flags += ["--" + k.replace("_", "-"), str(v)]
    got = attn.Translator(models["spm"], threads=2).translate(sources, **flags)
    assert got == cli_lines(models["spm"], sources, *cli_flags, threads=2)
    assert len(got) == len(sources) and got[-2] == ""


def test_subword_n_best_and_scores_as_the_cli(models):
    sources = spm_sources(models, 8)
    tr = attn.Translator(models["spm"], threads=2)
    hyps = tr.translate(sources, beam_size=3, n_best=3)
    assert n_best_lines(hyps) == cli_lines(models["spm"], sources, "--beam-size", "3",
                                           "--n-best", "3", threads=2)
    h = hyps[0][0]
    assert h.score == pytest.approx(h.log_prob / ((5 + len(h.ids) + h.eos) / 6) ** 0.6)
    assert "".join(h.tokens).replace("\u2581", " ").strip() == h.text
    greedy = tr.translate(sources, beam_size=1, return_scores=True)
    assert all(len(g) == 1 and np.isfinite(g[0].score) for g in greedy[:-2])
    assert [g[0].text for g in greedy] == tr.translate(sources, beam_size=1)


@pytest.mark.parametrize("precision,quantize", [("bf16", None), ("f32", "int8"),
                                                ("bf16", "int8")])
def test_reduced_precision_as_the_cli(models, precision, quantize, recwarn):
    sources = spm_sources(models, 40)
    tr = attn.Translator(models["spm"], precision=precision, quantize=quantize, threads=2)
    flags = ["--precision", precision, "--quantize", quantize or "none"]
    assert tr.translate(sources) == cli_lines(models["spm"], sources, *flags, threads=2)


@pytest.mark.parametrize("kind,sentence", [("spm", "I'm home."), ("word", "i lost .")])
def test_attention_as_the_cli(models, kind, sentence, tmp_path):
    out = tmp_path / "weights.json"
    run_cli("attention", "--model", models[kind], sentence, "--out", str(tmp_path / "a"),
            "--json", str(out))
    expected = json.loads(out.read_text())
    h = attn.Translator(models[kind]).translate([sentence], return_attention=True)[0][0]
    assert h.text == expected["translation"]
    maps = h.attention
    assert maps["source_tokens"] == expected["source_tokens"]
    assert maps["target_tokens"] == expected["target_tokens"]
    for name in ("encoder", "decoder_self", "decoder_cross"):
        assert len(maps[name]) == len(expected["attention"][name])
        for got, want in zip(maps[name], expected["attention"][name]):
            np.testing.assert_array_equal(got, np.array(want, np.float32))


def test_score_sums_to_the_cli_s_loss(models, tmp_path):
    test = os.path.join(models["spm"], "data", "test.tsv")
    with open(test, encoding="utf-8") as f:
        pairs = [line.split("\t") for line in f.read().splitlines()]
    tr = attn.Translator(models["spm"])
    scores = tr.score([p[0] for p in pairs], [p[1] for p in pairs], batch_size=7)
    total = sum(float(s.token_losses.sum()) for s in scores)
    tokens = sum(len(s.token_losses) for s in scores)
    cli = json.loads(run_cli("evaluate", "--model", models["spm"], "--data", test, "--json"))
    assert tokens == cli["target_tokens"]
    assert total / tokens == pytest.approx(cli["loss"], rel=1e-5)
    s = scores[0]
    assert s.tokens[-1] == "<eos>" and len(s.tokens) == len(s.token_losses)
    assert s.loss == pytest.approx(s.token_losses.mean())
    # The same pair alone or in a batch: the same losses (to float32 rounding).
    alone = tr.score([pairs[0][0]], [pairs[0][1]])[0]
    np.testing.assert_allclose(alone.token_losses, s.token_losses, rtol=1e-5)


@pytest.mark.parametrize("kind,args", [("spm", ["--split", "test"]),
                                       ("spm", ["--split", "valid", "--beam-size", "2",
                                                "--pairs", "3-7"]),
                                       ("word", ["--num-examples", "50"])])
def test_evaluate_as_the_cli(models, kind, args):
    if kind == "word":
        from conftest import SOURCE
        args = ["--data", os.path.join(SOURCE, "datasets", "fra-eng", "fra.txt.gz"), *args]
    cli = json.loads(run_cli("evaluate", "--model", models[kind], *args, "--json"))
    kw = {}
    for flag, value in zip(args[::2], args[1::2]):
        key = flag[2:].replace("-", "_")
        kw[key] = int(value) if value.isdigit() else value
    got = attn.evaluate(models[kind], **kw)
    assert got == cli


def test_translator_errors(models):
    tr = attn.Translator(models["spm"])
    with pytest.raises(ValueError, match="n_best 3 is more than the beam size 2"):
        tr.translate(["Hi."], beam_size=2, n_best=3)
    with pytest.raises(ValueError, match=r"max_length 100000 is not in \[1, the model's"):
        tr.translate(["Hi."], max_length=100000)
    with pytest.raises(ValueError, match="beam_size must be at least 1"):
        tr.translate(["Hi."], beam_size=0)
    with pytest.raises(ValueError, match="more than the model's"):
        tr.translate(["word " * 400])
    with pytest.raises(ValueError, match="precision"):
        attn.Translator(models["spm"], precision="f16")
    with pytest.raises(ValueError, match="split must be"):
        tr.evaluate(split="train")
    with pytest.raises(RuntimeError, match="manifest"):
        attn.Translator(os.path.dirname(models["spm"]))
    assert tr.config["tokenizer"] == "spm" and "Translator(" in repr(tr)
