"""A measurement run in the format bench/figures.py reads (bench/results/*.json).

The bench drivers (translate_batch.py, scale_sweep.py) build their --json
output with record(): the date, the CPU model and kind, the commit of the
attn that ran, the thread count and load average, the peer and its
settings, and one row per figure ({"id", "work", "attn", "peer", "ratio",
"rounds"}); their own detailed results go beside these keys.
"""
import datetime
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cpuinfo():
    try:
        with open("/proc/cpuinfo") as f:
            return f.read()
    except OSError:
        return ""


def cpu_model():
    """The CPU as the figures name it: Linux's model name without trademarks,
    clock or core count, and its model number (with the family on AMD):
    "Intel Xeon (model 167)", "AMD EPYC (family 25 model 1)"."""
    info = {}
    for line in _cpuinfo().splitlines():
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    name = info.get("model name", "unknown CPU")
    name = re.sub(r"\((R|TM)\)|\bProcessor\b|\bCPU\b|@.*$|\b\d+-Core\b", " ", name)
    name = " ".join(name.split())
    if "model" not in info:
        return name
    if info.get("vendor_id") == "AuthenticAMD":
        return f"{name} (family {info.get('cpu family', '?')} model {info['model']})"
    return f"{name} (model {info['model']})"


def cpu_kind(attn):
    """avx512-bf16, avx512 or avx2: AVX-512 with bf16 products faster than
    f32 ones, AVX-512 without (attn --version measures the rate), or
    neither."""
    flags = set()
    for line in _cpuinfo().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    if "avx512f" not in flags:
        return "avx2"
    version = subprocess.run([attn, "--version"], capture_output=True, text=True).stdout
    if "avx512_bf16" in flags and "bf16 products: none" not in version and \
            "slower than f32" not in version:
        return "avx512-bf16"
    return "avx512"


def commit():
    """The checkout's short commit, with -dirty when tracked files differ."""
    def git(*args):
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True,
                              text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def torch_version(python):
    """The PyTorch version of the peers' interpreter."""
    r = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "?"


def span(values, fmt):
    """'lo-hi' of the values in fmt, or one value when they agree."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def row(id, work, attn, peer, ratio, rounds=None):
    r = {"id": id, "work": work, "attn": attn, "peer": peer, "ratio": round(ratio, 2)}
    if rounds:
        r["rounds"] = [round(x, 2) for x in rounds]
    return r


def record(attn, threads, peer, peer_settings, rows, load=None, note=None, **extra):
    run = {"date": datetime.datetime.now().strftime("%Y-%m-%dT%H:%M"), "cpu": cpu_model(),
           "cpu_kind": cpu_kind(attn), "commit": commit(), "threads": threads,
           "peer": peer, "peer_settings": peer_settings}
    if load:
        run["load"] = load
    if note:
        run["note"] = note
    run["rows"] = rows
    run.update(extra)
    return run
