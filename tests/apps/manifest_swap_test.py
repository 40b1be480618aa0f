#!/usr/bin/env python3
"""`attn manifest` signs exactly what it checked, with another process
swapping the weights under it.

A model directory without a manifest; a second thread replaces its
model.safetensors, over and over, by rename, with either the good weights or
a copy holding a NaN (which `attn manifest` must refuse). Every run of `attn
manifest` that succeeds must write the good file's SHA-256: a manifest naming
the NaN file's digest would vouch for bytes that were never checked. Runs
that fail must fail in one line. How the runs and swaps interleave is left
to the scheduler: no count of successes or failures is asserted.

    manifest_swap_test.py --attn ATTN --model D2L_MODEL --work DIR [--runs 32]
"""
import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import threading


def with_nan(good):
    """The same safetensors bytes with the first F32 value of the first
    tensor set to NaN."""
    (n,) = struct.unpack("<Q", good[:8])
    header = json.loads(good[8:8 + n])
    name = sorted(k for k in header if k != "__metadata__")[0]
    assert header[name]["dtype"] == "F32", header[name]
    at = 8 + n + header[name]["data_offsets"][0]
    return good[:at] + struct.pack("<f", float("nan")) + good[at + 4:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--attn", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--runs", type=int, default=32)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    model = os.path.join(a.work, "model")
    shutil.copytree(a.model, model)
    os.remove(os.path.join(model, "manifest.json"))
    weights = os.path.join(model, "model.safetensors")
    good = open(weights, "rb").read()
    bad = with_nan(good)
    good_sha = hashlib.sha256(good).hexdigest()
    bad_sha = hashlib.sha256(bad).hexdigest()
    sources = []
    for name, data in (("good.bin", good), ("bad.bin", bad)):
        path = os.path.join(a.work, name)
        with open(path, "wb") as f:
            f.write(data)
        sources.append(path)

    stop = threading.Event()

    def swap():
        k = 0
        while not stop.is_set():
            tmp = os.path.join(a.work, f"swap.{k % 2}")
            shutil.copyfile(sources[k % 2], tmp)
            os.rename(tmp, weights)
            k += 1

    swapper = threading.Thread(target=swap)
    swapper.start()
    failures = signed = refused = 0
    try:
        for i in range(a.runs):
            r = subprocess.run([a.attn, "manifest", model], capture_output=True, text=True,
                               timeout=300)
            if r.returncode == 0:
                signed += 1
                m = json.load(open(os.path.join(model, "manifest.json")))
                sha = [f["sha256"] for f in m["files"] if f["name"] == "model.safetensors"][0]
                if sha != good_sha:
                    failures += 1
                    what = "the NaN file's" if sha == bad_sha else "an unknown"
                    print(f"run {i}: FAIL: the manifest names {what} SHA-256 {sha}")
                os.remove(os.path.join(model, "manifest.json"))
            else:
                refused += 1
                lines = r.stderr.splitlines()
                if r.returncode != 1 or not lines or not lines[0].startswith("attn: error: "):
                    failures += 1
                    print(f"run {i}: FAIL: exit {r.returncode}, {r.stderr!r}")
    finally:
        stop.set()
        swapper.join()
    print(f"{a.runs} runs beside a swapper: {signed} signed (the good weights), {refused} "
          f"refused the weights they read; {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
