"""attn.train against `attn train`: the same step losses, epoch losses,
validations and model, bit for bit, for the same flags, seed and threads;
the callback; keyword errors from the hyperparameter table; Ctrl-C leaves a
checkpoint that `attn train --resume` continues."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import attn
from conftest import CLI, SOURCE, run_cli

CORPUS = os.path.join(SOURCE, "datasets", "fra-eng", "fra.txt.gz")


def cli_train(out, *flags, threads=2, seed=0):
    metrics = os.path.join(out + "-metrics.json")
    run_cli("--threads", str(threads), "--seed", str(seed), "train", "--quiet", "--out", out,
            "--metrics-json", metrics, *flags)
    with open(metrics) as f:
        return json.load(f)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def test_d2l_losses_bit_for_bit(tmp_path):
    events = []
    got = attn.train("d2l", str(tmp_path / "py"), data=CORPUS, num_examples=100, epochs=3,
                     seed=3, threads=2, callback=events.append)
    want = cli_train(str(tmp_path / "cli"), "--data", CORPUS, "--num-examples", "100",
                     "--epochs", "3", seed=3)
    assert got["step_losses"] == want["step_losses"]  # exact floats
    assert got["epoch_losses"] == want["epoch_losses"]
    assert got["final_loss"] == want["final_loss"]
    assert read(tmp_path / "py" / "model.safetensors") == read(tmp_path / "cli" / "model.safetensors")
    steps = [e for e in events if e["kind"] == "step"]
    assert [e["loss"] for e in steps] == got["step_losses"]
    assert [e["step"] for e in steps] == list(range(1, got["steps"] + 1))
    assert [e["epoch_loss"] for e in events if e["kind"] == "epoch"] == got["epoch_losses"]
    # The model directory is one `attn translate` reads.
    assert attn.Translator(str(tmp_path / "py")).translate(["go ."]) == \
        run_cli("translate", "--model", str(tmp_path / "cli"), "go .").splitlines()


def test_translator_losses_and_validations_bit_for_bit(tmp_path):
    flags = dict(preset="tatoeba", data=CORPUS, num_examples=300, valid_size=20, test_size=20,
                 num_hiddens=32, ffn_num_hiddens=64, num_layers=1, epochs=2, valid_freq=4,
                 vocab_size=200)
    events = []
    got = attn.train(out=str(tmp_path / "py"), seed=1, threads=2, callback=events.append,
                     **{k: v for k, v in flags.items()})
    args = ["--preset", "tatoeba", "--data", CORPUS]
    for k, v in flags.items():
        if k not in ("preset", "data"):
            args += ["--" + {"epochs": "epochs"}.get(k, k).replace("_", "-"), str(v)]
    want = cli_train(str(tmp_path / "cli"), *args, seed=1)
    assert got["step_losses"] == want["step_losses"]
    assert [(v["step"], v["loss"], v["bleu"]) for v in got["validations"]] == \
        [(v["step"], v["loss"], v["bleu"]) for v in want["validations"]]
    assert got["best_validation"] == want["best_validation"]
    assert [e["loss"] for e in events if e["kind"] == "validation"] == \
        [v["loss"] for v in want["validations"]]
    for f in ("model.safetensors", "spm.model", os.path.join("data", "test.tsv")):
        assert read(tmp_path / "py" / f) == read(tmp_path / "cli" / f), f


def test_every_flag_of_the_table_is_a_keyword():
    table = attn.hyperparameters()
    assert table["num_epochs"]["flag"] == "--epochs" and table["num_epochs"]["keyword"] == "epochs"
    assert table["path"]["keyword"] == "data"
    assert "src_vocab_size" not in table  # derived from the data, not a flag
    assert attn.hyperparameters("tatoeba")["tokenizer"]["default"] == "spm"
    help_text = run_cli("train", "--help")
    for row in table.values():
        if row["flag"] != "--seed":  # a global option of attn
            assert row["flag"] in help_text


def test_keyword_errors(tmp_path):
    with pytest.raises(ValueError, match="'frobnicate' is not a hyperparameter"):
        attn.train(out=str(tmp_path / "x"), data=CORPUS, frobnicate=1)
    with pytest.raises(ValueError, match=r"--num-hiddens: 0 is not in \[1, 65536\]"):
        attn.train(out=str(tmp_path / "x"), data=CORPUS, num_hiddens=0)
    with pytest.raises(ValueError, match="num_hiddens 30 is not divisible by num_heads 4"):
        attn.train(out=str(tmp_path / "x"), data=CORPUS, num_hiddens=30)
    with pytest.raises(ValueError, match="unknown preset|preset"):
        attn.train("nope", out=str(tmp_path / "x"), data=CORPUS)
    assert not os.path.exists(tmp_path / "x")


def test_callback_error_stops_training_with_a_checkpoint(tmp_path):
    def callback(event):
        if event["kind"] == "step" and event["step"] == 2:
            raise RuntimeError("enough")

    out = str(tmp_path / "m")
    with pytest.raises(RuntimeError, match="enough"):
        attn.train(out=out, data=CORPUS, num_examples=100, epochs=50, callback=callback)
    assert os.path.exists(os.path.join(out, "checkpoint.safetensors"))
    with pytest.raises(ValueError, match="holds a model already"):
        attn.train(out=out, data=CORPUS, num_examples=100, epochs=1)
    attn.train(out=out, data=CORPUS, num_examples=100, epochs=1, overwrite=True)


CHILD = textwrap.dedent("""
    import sys
    import attn
    said = []
    def callback(event):
        if not said:
            said.append(1)
            print("training", flush=True)
    try:
        attn.train(out=sys.argv[2], data=sys.argv[1], num_examples=600, epochs=200,
                   callback=callback)
        print("finished", flush=True)
    except KeyboardInterrupt as e:
        print("KeyboardInterrupt:", e, flush=True)
""")


def test_ctrl_c_leaves_a_checkpoint_that_resumes(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = str(tmp_path / "m")
    child = subprocess.Popen([sys.executable, str(script), CORPUS, out], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert child.stdout.readline().strip() == "training"
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=600)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, stderr
    assert stdout.startswith("KeyboardInterrupt: attn.train: interrupted after step "), stdout
    assert "checkpoint saved in" in stdout and "resume with: attn train --resume" in stdout
    # The checkpoint is whole: the CLI resumes it and ends the first epoch.
    r = subprocess.run([CLI, "train", "--resume", out, "--epochs", "1", "--quiet"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
