#!/usr/bin/env python3
"""`attn translate` as a coprocess: each line written to its stdin (a pipe)
is answered on stdout before the next one is written, with and without
--stream, and the answers are those of the whole file at once. Before
--stream, a reader waiting for one line's answer waited for 1,024 lines.
The waits are bounded only to end a hung test."""

import argparse
import os
import queue
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import cli_translations, test_sources  # noqa: E402


def coprocess(attn, model, sentences, flags):
    p = subprocess.Popen([attn, "translate", "--model", model, *flags], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, bufsize=1)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in p.stdout], daemon=True).start()
    answers = []
    try:
        for s in sentences:
            p.stdin.write(s + "\n")
            p.stdin.flush()
            try:
                answers.append(lines.get(timeout=300).rstrip("\n"))
            except queue.Empty:
                print(f"FAIL  no answer to {s!r} while stdin stays open")
                return None
        p.stdin.close()
        rc = p.wait(timeout=300)
        if rc != 0:
            print(f"FAIL  exit {rc}")
            return None
    finally:
        if p.poll() is None:
            p.kill()
    return answers


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--attn", required=True)
    a.add_argument("--model", required=True)
    args = a.parse_args()
    sentences = test_sources(args.model, 5)
    expected = cli_translations(args.attn, args.model, sentences)
    failures = 0
    for flags in ([], ["--stream"], ["--stream", "--beam-size", "1"]):
        want = expected if not flags[1:] else cli_translations(args.attn, args.model, sentences,
                                                               *flags[1:])
        got = coprocess(args.attn, args.model, sentences, flags)
        ok = got == want
        print(("ok    " if ok else "FAIL  ") + f"coprocess {' '.join(flags) or '(a pipe)'}: {got}")
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
