#!/usr/bin/env python3
"""attn serve under load against `attn translate` on the same sentences:
throughput and p50/p99 latency at 1, 8 and 64 concurrent clients, and a soak
mode that watches the server's memory.

    python3 bench/serve_load.py --attn build/release/attn --model out/tatoeba \\
        [--sentences 2000] [--clients 1,8,64] [--rounds 3] [--threads 2] \\
        [--json out/serve_load.json] [--serve-args "--inter-threads 1"]
    python3 bench/serve_load.py --attn ... --model ... --soak 600 [--soak-clients 8]

The sentences are the held-out test sources (the first --sentences of
MODEL/data/test.tsv). Each round, in one fresh process each:

  - the CLI: `attn translate` on all of them from a file, in one process
    (its --metrics-json: the time from the first sentence read to the last
    translation written, without loading the model): sentences/s. And the
    library call's latency: `attn translate --stream` as a coprocess, one
    sentence written, its translation read, the next written, over the
    same sentences as the server's clients (the test split grows longer
    towards its end: a prefix would flatter the CLI).
  - the server: `attn serve --port 0`, then for each client count C, C
    kept-alive connections send every sentence once between them (POST
    /translate, LibreTranslate's JSON), each request timed from its first
    byte sent to its answer read: sentences/s over the wall time of the C
    clients, and p50/p99 of the requests. The clients are
    bench/serve_load_client (C++, built with attn): one thread of
    Boost.Asio for all C connections, so that the generator, on the
    server's own cores, takes as little of them as a client can (the
    threads of Python's http.client took 0.24 ms of CPU a request, 11% of
    two cores at 64 clients; this takes about 0.05 ms). Every answer is
    compared with the CLI's translation (mismatches are counted and
    reported). Where the cores went: the server's CPU time
    (/proc/PID/stat) and the clients' own, per sentence, beside the CLI's
    core time per sentence (--threads over its sentences/s), and the share
    of the machine's cores left idle.

The order of the CLI and the server alternates between rounds; medians of
the rounds are reported with every round's figures, the load average
before and after, the CPU and the commit. A bounded generator: every
client sends a fixed number of requests, loopback only.

Soak (--soak SECONDS): the server under --soak-clients clients for that
long, its resident memory (VmRSS) sampled every --soak-every seconds; the
growth from the first sample after a minute's warm-up to the last.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def commit():
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                       text=True)
    return r.stdout.strip() or "unknown"


def percentile(values, p):
    v = sorted(values)
    if not v:
        return None
    k = (len(v) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def read_sources(model, n):
    with open(os.path.join(model, "data", "test.tsv"), encoding="utf-8") as f:
        return [line.split("\t")[0] for line in f if "\t" in line][:n]


def cli_batch(a, sentences):
    """attn translate on every sentence in one process: (translations, sentences/s)."""
    with tempfile.TemporaryDirectory() as d:
        src, metrics = os.path.join(d, "src.txt"), os.path.join(d, "metrics.json")
        with open(src, "w", encoding="utf-8") as f:
            f.write("\n".join(sentences) + "\n")
        with open(src, encoding="utf-8") as f:
            r = subprocess.run([a.attn, "--threads", str(a.threads), "translate", "--model", a.model,
                                "--metrics-json", metrics], stdin=f, capture_output=True, text=True,
                               check=True)
        with open(metrics) as f:
            m = json.load(f)
    return r.stdout.split("\n")[:len(sentences)], m["sentences_per_s"]


def cli_latency(a, sentences):
    """attn translate --stream as a coprocess: seconds per sentence, one at a time."""
    p = subprocess.Popen([a.attn, "--threads", str(a.threads), "translate", "--model", a.model,
                          "--stream"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         bufsize=1)
    times = []
    try:
        p.stdin.write(sentences[0] + "\n")  # warm-up: the first call packs the weights
        p.stdin.flush()
        p.stdout.readline()
        for s in sentences:
            t = time.perf_counter()
            p.stdin.write(s + "\n")
            p.stdin.flush()
            p.stdout.readline()
            times.append(time.perf_counter() - t)
    finally:
        p.stdin.close()
        p.wait()
    return times


class Serve:
    def __init__(self, a):
        self.proc = subprocess.Popen([a.attn, "--threads", str(a.threads), "serve", "--model",
                                      a.model, "--port", "0", "--max-queue", "100000",
                                      "--max-connections", "4096", *a.serve_args],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        m = re.search(r"listening on http://([0-9.]+):(\d+)", self.proc.stdout.readline())
        if not m:
            self.proc.kill()
            sys.exit("serve_load: attn serve did not start")
        self.host, self.port = m.group(1), int(m.group(2))

    def cpu_s(self):
        """The server's user + system CPU seconds so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return None

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def drive(a, server, sentences, expected, clients, seconds=0):
    """Every sentence once (or, with `seconds`, round and round for that
    long) over `clients` kept-alive connections of serve_load_client:
    (latencies, wall seconds, mismatches, the client's CPU seconds)."""
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt") as f:
        f.write("\n".join(sentences) + "\n")
        f.flush()
        r = subprocess.run([a.client, "--host", server.host, "--port", str(server.port),
                            "--sentences", f.name, "--clients", str(clients),
                            "--seconds", str(seconds)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"serve_load: the clients failed: {r.stderr.strip()}")
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    end = lines.pop()
    latencies = [x["us"] / 1e6 for x in lines]
    mismatches = sum(x["status"] != 200 or x["text"] != expected[x["i"]] for x in lines)
    return latencies, end["wall_s"], mismatches, end["cpu_s"]


def server_round(a, sentences, expected):
    server = Serve(a)
    out = {}
    try:
        drive(a, server, sentences[:min(len(sentences), 32)], expected, 4)  # warm-up
        for c in a.clients:
            server_cpu = server.cpu_s()
            lat, wall, bad, client_cpu = drive(a, server, sentences, expected, c)
            server_cpu = server.cpu_s() - server_cpu
            n = len(sentences)
            out[str(c)] = {"sentences_per_s": n / wall,
                           "p50_ms": percentile(lat, 50) * 1000, "p99_ms": percentile(lat, 99) * 1000,
                           "mismatches": bad,
                           "server_cpu_ms_per_sentence": server_cpu / n * 1000,
                           "client_cpu_ms_per_sentence": client_cpu / n * 1000,
                           "idle_share": 1 - (server_cpu + client_cpu) / (wall * os.cpu_count())}
    finally:
        server.stop()
    return out


def soak(a, sentences, expected):
    server = Serve(a)
    samples, result = [], []
    try:
        t0 = time.monotonic()
        worker = threading.Thread(target=lambda: result.append(
            drive(a, server, sentences, expected, a.soak_clients, seconds=a.soak)))
        worker.start()
        while worker.is_alive():
            samples.append((round(time.monotonic() - t0, 1), server.rss_kb()))
            worker.join(timeout=a.soak_every)
    finally:
        server.stop()
    lat, wall, bad, _ = result[0]
    rss = [s for s in samples if s[1] is not None]
    warm = [s for s in rss if s[0] >= min(60, a.soak / 4)] or rss
    growth = (warm[-1][1] - warm[0][1]) / warm[0][1] if warm else None
    return {"seconds": a.soak, "clients": a.soak_clients, "requests": len(lat),
            "mismatches": bad, "p50_ms": percentile(lat, 50) * 1000,
            "p99_ms": percentile(lat, 99) * 1000, "rss_kb": rss,
            "rss_growth_after_warmup": growth}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--attn", default=os.path.join(ROOT, "build", "release", "attn"))
    p.add_argument("--client",
                   default=os.path.join(ROOT, "build", "release", "bench", "serve_load_client"),
                   help="the clients' program (bench/serve_load_client.cpp, built with attn)")
    p.add_argument("--model", required=True)
    p.add_argument("--sentences", type=int, default=2000)
    p.add_argument("--clients", default="1,8,64")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json")
    p.add_argument("--serve-args", default="",
                   help="more flags for attn serve, as one string (e.g. \"--inter-threads 1\")")
    p.add_argument("--soak", type=float, default=0, help="seconds; 0: no soak")
    p.add_argument("--soak-clients", type=int, default=8)
    p.add_argument("--soak-every", type=float, default=5)
    a = p.parse_args()
    a.clients = [int(c) for c in a.clients.split(",")]
    a.serve_args = a.serve_args.split()
    if not os.access(a.client, os.X_OK):
        sys.exit(f"serve_load: no clients' program at {a.client} (make build builds it)")
    sentences = read_sources(a.model, a.sentences)
    expected, _ = cli_batch(a, sentences)
    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "cpu": cpu_model(),
              "commit": commit(), "threads": a.threads, "sentences": len(sentences),
              "load_before": load_average()}
    if a.soak > 0:
        report["soak"] = soak(a, sentences, expected)
    else:
        rounds = []
        for r in range(a.rounds):
            cli = {}
            server = None
            if r % 2:
                server = server_round(a, sentences, expected)
            _, cli["sentences_per_s"] = cli_batch(a, sentences)
            lat = cli_latency(a, sentences)  # the sentences the one client sends
            cli["p50_ms"], cli["p99_ms"] = percentile(lat, 50) * 1000, percentile(lat, 99) * 1000
            if server is None:
                server = server_round(a, sentences, expected)
            rounds.append({"cli": cli, "server": server})
            print(json.dumps(rounds[-1]), flush=True)
        med = lambda xs: statistics.median(xs)  # noqa: E731
        summary = {"cli": {k: med([r["cli"][k] for r in rounds]) for k in rounds[0]["cli"]}}
        summary["cli"]["core_ms_per_sentence"] = a.threads / summary["cli"]["sentences_per_s"] * 1000
        for c in a.clients:
            s = {k: med([r["server"][str(c)][k] for r in rounds])
                 for k in ("sentences_per_s", "p50_ms", "p99_ms", "server_cpu_ms_per_sentence",
                           "client_cpu_ms_per_sentence", "idle_share")}
            s["mismatches"] = sum(r["server"][str(c)]["mismatches"] for r in rounds)
            s["throughput_vs_cli"] = s["sentences_per_s"] / summary["cli"]["sentences_per_s"]
            s["p99_over_p50"] = s["p99_ms"] / s["p50_ms"]
            summary[str(c)] = s
        summary["p50_1_client_minus_cli_ms"] = summary[str(a.clients[0])]["p50_ms"] - \
            summary["cli"]["p50_ms"]
        report.update({"rounds": rounds, "median": summary})
    report["load_after"] = load_average()
    text = json.dumps(report, indent=2)
    print(text)
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
