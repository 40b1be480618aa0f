#!/usr/bin/env python3
"""docs/errors.md quotes messages the code prints: each must still be there.

    python3 tests/docs/errors_doc_test.py [--root DIR]

Every quoted span of docs/errors.md that reads as a message (three words or
more, not a command line) is cut at the parts that vary from one error to
the next: quoted names ('x', "key"), numbers, flags (--name), [shapes] and
"...". Each remaining run of words must come from the string literals of
src/, apps/ and include/: either as it stands, or as one format string
prints it, where a {} placeholder of the format (fmt's) may stand for one
to six words of the message, and at least half the message's words must
be the format's own. Messages of other programs (CLI11, the C library,
zlib, SentencePiece, Open MPI) are listed in EXTERNAL and not checked.
Prints each message it cannot find and exits 1; exits 0 when all are found.
"""
import argparse
import os
import re
import sys

EXTERNAL = ["The following argument", "is required", "No such file or directory",
            "Too many levels of symbolic links", "invalid block type", "incorrect data check",
            "Vocabulary size too high", "Please set it to a value", "MPI_ABORT was invoked",
            "mpirun noticed that process", "not in {", "Permission denied",
            "No space left on device", "exited on signal"]
# The parts of a message that vary: quoted text, flags, numbers (not the 512
# of AVX-512), shapes, the ellipsis, and the letters N, M, K standing for a
# number.
VARIES = re.compile(r"'[^']*'|\"[^\"]*\"|--[\w-]+|(?<![\w-])[-+]?\d[\d.,e^+x-]*|\.\.\.|"
                    r"\b[NMK]\b|\[[^\]]*\]")


def quoted_spans(doc):
    """Code-fence lines, and the `...` spans of the text around them."""
    spans, text = [], []
    for i, block in enumerate(re.split(r"^```.*$", doc, flags=re.M)):
        if i % 2:
            spans += [line for line in block.split("\n") if line.strip()]
        else:
            text.append(block)
    return spans + re.findall(r"`([^`]+)`", " ".join(text).replace("\n", " "))


def string_literals(source):
    """The C++ string literals of a file, adjacent ones joined, escapes read."""
    out = [m.group(2) for m in re.finditer(r'R"(\w*)\((.*?)\)\1"', source, re.S)]
    source = re.sub(r'R"(\w*)\((.*?)\)\1"', '""', source, flags=re.S)
    source = re.sub(r"//[^\n]*", "", source)
    current, end = None, None
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"', source):
        text = (m.group(1).replace('\\"', '"').replace("\\n", "\n").replace("\\t", "\t")
                .replace("\\\\", "\\"))
        if current is not None and not source[end:m.start()].strip():
            current += text
        else:
            if current is not None:
                out.append(current)
            current = text
        end = m.end()
    if current is not None:
        out.append(current)
    return out


def bare(word):
    return re.sub(r"^\W+|\W+$", "", word)


def literal_words(f, fmt):
    """The most words of the message run f that the format's own words
    match, f taken whole from any position of the format, a word holding a
    placeholder standing for 1-6 words of f; -1 if f cannot be taken whole."""
    n, m = len(f), len(fmt)
    best = [[-1] * (m + 1) for _ in range(n + 1)]
    best[0] = [0] * (m + 1)
    for i in range(n):
        for j in range(m):
            v = best[i][j]
            if v < 0:
                continue
            if "{" in fmt[j]:
                for k in range(1, 7):
                    if i + k <= n:
                        best[i + k][j + 1] = max(best[i + k][j + 1], v)
            elif bare(f[i]) == bare(fmt[j]):
                best[i + 1][j + 1] = max(best[i + 1][j + 1], v + 1)
    return max(best[n])


def found(run, corpus, formats):
    if run in corpus:
        return True
    words = run.split()
    keys = {w for w in words if len(w) >= 3}
    for fmt in formats:
        if sum(w in keys for w in fmt) < max(1, len(keys) // 2):
            continue
        got = literal_words(words, fmt)
        if got >= 2 and got >= 0.5 * len(words):
            return True
    return False


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), help="the repository (default: this file's)")
    a = p.parse_args()

    literals = []
    for top in ("src", "apps", "include"):
        for dirpath, _, files in os.walk(os.path.join(a.root, top)):
            for name in files:
                if name.endswith((".cpp", ".h")):
                    with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                        literals += string_literals(f.read())
    corpus = "\0".join(literals)
    formats = [lit.split() for lit in literals if "{" in lit]

    with open(os.path.join(a.root, "docs", "errors.md"), encoding="utf-8") as f:
        spans = quoted_spans(f.read())
    checked, missing = 0, []
    for span in spans:
        message = re.sub(r"^(attn: (error|warning): |hint: )", "", span.strip())
        if len(message.split()) < 3 or re.match(r"(attn |mpirun|iconv|make |tr |cmake|<)",
                                                message):
            continue
        runs = [r.strip(" :;,.()") for r in VARIES.split(message)]
        runs = [r for r in runs if len(r.split()) >= 2 and not any(e in r for e in EXTERNAL)]
        if not runs:
            continue
        checked += 1
        long_runs = [r for r in runs if len(r.split()) >= 4]
        lost = [r for r in (long_runs or runs) if not found(r, corpus, formats)]
        if lost:
            missing.append((message, lost))
    for message, lost in missing:
        print(f"docs/errors.md quotes a message the code does not print: {message}\n"
              f"    not found: {' | '.join(lost)}")
    print(f"{checked} messages checked, {len(missing)} not found")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
