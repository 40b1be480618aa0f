"""Trains the two small models the translator tests read, with `attn train`,
unless they are there already:

  word  d2l's Transformer on d2l's pipeline (--preset d2l), a few epochs;
  spm   a translator: a SentencePiece vocabulary of 300 pieces, a held-out
        split (data/valid.tsv, data/test.tsv), one layer of 32 hiddens.

    /usr/bin/python3 tests/python/make_models.py ATTN_CLI WORK_DIR
"""
import fcntl
import os
import subprocess
import sys

RUNS = {
    "word": ["--threads", "1", "train", "--overwrite", "--quiet", "--epochs", "10",
             "--num-examples", "200"],
    "spm": ["--threads", "1", "train", "--preset", "tatoeba", "--overwrite", "--quiet",
            "--num-examples", "400", "--valid-size", "30", "--test-size", "30",
            "--num-hiddens", "32", "--ffn-num-hiddens", "64", "--num-layers", "1",
            "--epochs", "2", "--valid-freq", "5", "--vocab-size", "300"],
}


def make(cli, work):
    """The model directories by name, trained first where missing (one
    process at a time: a lock file serializes test processes)."""
    dirs = {}
    os.makedirs(os.path.join(work, "models"), exist_ok=True)
    with open(os.path.join(work, "models", ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name, args in RUNS.items():
            out = os.path.join(work, "models", name)
            done = os.path.join(work, "models", name + ".done")
            if not os.path.exists(done):
                r = subprocess.run([cli, *args, "--out", out], capture_output=True, text=True,
                                   check=False)
                if r.returncode != 0:
                    raise RuntimeError(f"attn train ({name}) failed: {r.stderr}")
                open(done, "w").close()
            dirs[name] = out
    return dirs


if __name__ == "__main__":
    for name, path in make(sys.argv[1], sys.argv[2]).items():
        print(name, path)
