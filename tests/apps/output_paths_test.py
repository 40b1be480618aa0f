#!/usr/bin/env python3
"""Every output flag of every command against what must never be replaced.

One rule decides whether attn may write a file (io::output_path_refusal):
nothing there yet, or a regular file with a write bit. Each command's output
flags are run here against a character device, a symbolic link to a file, a
dangling symbolic link, a FIFO, a directory and a read-only file. Each run
must fail with a one-line error (exit 1 or 2) naming what is there, and leave
the target exactly as it was: the same inode, type and mode, a link pointing
where it pointed, the file behind it and the read-only file unchanged, no
temp file beside it. A FIFO is never opened for writing (the run would hang;
every run has a bound only to end a hung test).

    output_paths_test.py --attn ATTN --model D2L_MODEL --spm-model SPM_MODEL --work DIR
"""
import argparse
import hashlib
import os
import shutil
import stat
import subprocess
import sys

KINDS = ["device", "symlink", "dangling", "fifo", "directory", "readonly"]
# What the error line says of each kind, for a flag that names a file.
REASON = {
    "device": "character device",
    "symlink": "symbolic link",
    "dangling": "symbolic link",
    "fifo": "FIFO",
    "directory": "directory",
    "readonly": "read-only",
}


def make(kind, path, victim):
    """Puts a thing of `kind` at `path`; False where this user cannot."""
    if kind == "device":
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # like /dev/null
        except PermissionError:
            return False
    elif kind == "symlink":
        os.symlink(victim, path)
    elif kind == "dangling":
        os.symlink(os.path.join(os.path.dirname(path), "nowhere"), path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "readonly":
        with open(path, "w") as f:
            f.write("a file made read-only\n")
        os.chmod(path, 0o444)
    return True


def snapshot(path, victim):
    """What must not change: the entry itself, and the file a link points to."""
    st = os.lstat(path)
    s = {"ino": st.st_ino, "mode": st.st_mode}
    if stat.S_ISLNK(st.st_mode):
        s["link"] = os.readlink(path)
    elif stat.S_ISREG(st.st_mode):
        s["sha"] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    elif stat.S_ISDIR(st.st_mode):
        s["entries"] = sorted(os.listdir(path))
    s["victim"] = hashlib.sha256(open(victim, "rb").read()).hexdigest()
    s["dir"] = sorted(os.listdir(os.path.dirname(path)))
    return s


def cases(a, w):
    """(name, argv with {} for the target, how the target is named, kinds)."""
    d2l, spm = a.model, a.spm_model
    train = ["--threads", "1", "train", "--quiet", "--epochs", "1", "--num-examples", "20",
             "--num-hiddens", "8", "--ffn-num-hiddens", "8", "--num-heads", "2"]
    return [
        ("train --metrics-json", train + ["--out", f"{w}/t1", "--metrics-json", "{}"], "file"),
        ("train --log", train + ["--out", f"{w}/t2", "--log", "{}"], "file"),
        ("translate --metrics-json",
         ["translate", "--model", d2l, "--metrics-json", "{}", "i lost ."], "file"),
        ("attention --json", ["attention", "--model", d2l, "i lost .", "--json", "{}"], "file"),
        ("attention --html", ["attention", "--model", d2l, "i lost .", "--html", "{}"], "file"),
        ("attention --out (its pictures)",
         ["attention", "--model", d2l, "i lost .", "--out", "{stem}"], "stem"),
        ("export --onnx", ["export", "--onnx", spm, "{}"], "file"),
        ("manifest (manifest.json)", ["manifest", "{dir}"], "manifest"),
        ("train --out (a file inside)", train + ["--out", "{dir}"], "inside"),
        ("train --out", train + ["--out", "{}"], "dir"),
        ("demo --out", ["demo", "cues", "--out", "{}"], "dir"),
    ]


def run_case(a, w, name, argv, how, kind, victim):
    case_dir = os.path.join(w, f"{len(os.listdir(w))}")
    os.mkdir(case_dir)
    if how == "file":
        target = os.path.join(case_dir, "out.file")
        args = [x.replace("{}", target) for x in argv]
    elif how == "stem":
        target = os.path.join(case_dir, "pic-encoder.png")
        args = [x.replace("{stem}", os.path.join(case_dir, "pic")) for x in argv]
    elif how == "manifest":
        shutil.copytree(a.model, os.path.join(case_dir, "m"))
        os.remove(os.path.join(case_dir, "m", "manifest.json"))
        target = os.path.join(case_dir, "m", "manifest.json")
        args = [x.replace("{dir}", os.path.join(case_dir, "m")) for x in argv]
    elif how == "inside":
        os.mkdir(os.path.join(case_dir, "out"))
        target = os.path.join(case_dir, "out", "loss.png")
        args = [x.replace("{dir}", os.path.join(case_dir, "out")) for x in argv]
    else:  # a directory flag: the target itself
        target = os.path.join(case_dir, "out.dir")
        args = [x.replace("{}", target) for x in argv]
    if how == "dir" and kind == "directory":
        return None  # a directory is what a directory flag names: not a refusal case
    if not make(kind, target, victim):
        return f"(skipped: this user cannot make a {kind})"
    before = snapshot(target, victim)
    try:
        r = subprocess.run([a.attn] + args, capture_output=True, text=True, timeout=300,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"FAIL: {name} against a {kind}: still running after 300 s (opened a FIFO?)"
    after = snapshot(target, victim)
    errors = []
    if r.returncode not in (1, 2):
        errors.append(f"exit {r.returncode}, expected 1 or 2")
    lines = r.stderr.splitlines()
    if not lines or not lines[0].startswith("attn: error: "):
        errors.append(f"stderr does not start with 'attn: error: ': {r.stderr!r}")
    elif len([x for x in lines if x.startswith("attn: error: ")]) != 1:
        errors.append(f"more than one error line: {r.stderr!r}")
    elif how != "dir" and REASON[kind] not in lines[0]:
        errors.append(f"the error does not say '{REASON[kind]}': {lines[0]!r}")
    if before != after:
        errors.append(f"the target changed: {before} -> {after}")
    if errors:
        return f"FAIL: {name} against a {kind}: " + "; ".join(errors)
    return "ok: " + (lines[0] if lines else "")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--attn", required=True)
    p.add_argument("--model", required=True, help="a word (d2l) model directory")
    p.add_argument("--spm-model", required=True, help="a subword model directory")
    p.add_argument("--work", required=True)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    victim = os.path.join(a.work, "victim.txt")
    with open(victim, "w") as f:
        f.write("the file a link points to\n")
    w = os.path.join(a.work, "cases")
    os.mkdir(w)
    failures = 0
    for name, argv, how in cases(a, w):
        for kind in KINDS:
            result = run_case(a, w, name, argv, how, kind, victim)
            if result is None:
                continue
            print(f"{name:32} {kind:10} {result}", flush=True)
            failures += result.startswith("FAIL")
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
