#!/usr/bin/env python3
"""`attn train --overwrite` with the disk filling at every write of the run.

A directory holds a finished run (num_hiddens 8: model, checkpoint,
pictures). A new run (num_hiddens 16) replaces it with --overwrite while the
disk fills at its N-th write to a file, for every N from the first write to
the last (tests/apps/enospc_preload.c). After each failed run:

  - the directory holds one whole model, the old or the new (it loads);
  - a checkpoint, where there is one, belongs to that model: the same run id
    in its metadata and in the weights', and the same settings;
  - `attn train --resume` never continues the old run beside the new model:
    it resumes the model's own run or refuses in one line.

    overwrite_enospc_test.py --attn ATTN --preload LIBENOSPC.so --work DIR
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

SMALL = ["--threads", "1", "train", "--quiet", "--epochs", "2", "--num-examples", "40",
         "--num-heads", "2", "--ffn-num-hiddens", "8"]


def header(path):
    """The JSON header of a safetensors file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def run_id_of_weights(d):
    return header(os.path.join(d, "model.safetensors")).get("__metadata__", {}).get(
        "attn.run_id")


def checkpoint_of(d):
    path = os.path.join(d, "checkpoint.safetensors")
    if not os.path.exists(path):
        return None
    return json.loads(header(path)["__metadata__"]["checkpoint"])


def attn(a, args, env=None, timeout=600):
    return subprocess.run([a.attn] + args, capture_output=True, text=True, timeout=timeout,
                          env=env, stdin=subprocess.DEVNULL)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--attn", required=True)
    p.add_argument("--preload", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    old = os.path.join(a.work, "old")
    r = attn(a, SMALL + ["--num-hiddens", "8", "--out", old])
    if r.returncode != 0:
        sys.exit(f"the old run failed: {r.stderr}")
    old_id = run_id_of_weights(old)
    assert old_id and checkpoint_of(old)["run_id"] == old_id, "the old run's ids"

    # How many writes a whole new run makes.
    count_file = os.path.join(a.work, "count")
    probe = os.path.join(a.work, "probe")
    shutil.copytree(old, probe)
    env = dict(os.environ, LD_PRELOAD=a.preload, ATTN_TEST_ENOSPC_COUNT=count_file)
    new = SMALL + ["--num-hiddens", "16", "--overwrite"]
    r = attn(a, new + ["--out", probe], env=env)
    if r.returncode != 0:
        sys.exit(f"the new run failed without a full disk: {r.stderr}")
    writes = int(open(count_file).read())
    print(f"a whole run with --overwrite makes {writes} writes to files", flush=True)
    assert writes > 5, "the preload counted the writes"

    failures = 0
    resumed = refused = 0
    for n in range(1, writes + 1):
        d = os.path.join(a.work, f"at-{n}")
        shutil.copytree(old, d)
        env = dict(os.environ, LD_PRELOAD=a.preload, ATTN_TEST_ENOSPC_AT=str(n))
        r = attn(a, new + ["--out", d], env=env)
        problems = []
        if r.returncode == 0:
            problems.append("the run succeeded on a full disk")
        elif not r.stderr.startswith("attn: error: "):
            problems.append(f"no one-line error: {r.stderr!r}")
        t = attn(a, ["translate", "--model", d, "go ."])
        if t.returncode != 0:
            problems.append(f"the directory holds no whole model: {t.stderr.strip()}")
        model_id = run_id_of_weights(d)
        model_h = json.load(open(os.path.join(d, "config.json")))["num_hiddens"]
        ckpt = checkpoint_of(d)
        if ckpt is not None:
            if ckpt.get("run_id") != model_id or ckpt["model"]["num_hiddens"] != model_h:
                problems.append(f"a checkpoint of run {ckpt.get('run_id')} (num_hiddens "
                                f"{ckpt['model']['num_hiddens']}) beside a model of run "
                                f"{model_id} (num_hiddens {model_h})")
            # The checkpoint continues its own model's run, whichever it is.
            rr = attn(a, ["--threads", "1", "train", "--quiet", "--resume", d])
            if rr.returncode != 0:
                problems.append(f"--resume of a matching checkpoint failed: {rr.stderr.strip()}")
            elif json.load(open(os.path.join(d, "config.json")))["num_hiddens"] != model_h:
                problems.append("--resume replaced the model by another run's")
            resumed += 1
        else:
            rr = attn(a, ["--threads", "1", "train", "--quiet", "--resume", d])
            if rr.returncode != 1 or len(rr.stderr.splitlines()) > 2:
                problems.append(f"--resume without a checkpoint: exit {rr.returncode}, "
                                f"{rr.stderr!r}")
            refused += 1
        status = "ok" if not problems else "FAIL: " + "; ".join(problems)
        print(f"disk full from write {n:3}: exit {r.returncode}, model num_hiddens {model_h}, "
              f"checkpoint {'none' if ckpt is None else ckpt['model']['num_hiddens']}: {status}",
              flush=True)
        failures += bool(problems)
        shutil.rmtree(d)
    print(f"{writes} places the disk filled: {resumed} left a checkpoint of the model's own run "
          f"(resumed), {refused} none (resume refused); {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
