"""A client of `attn serve` for the tests (tests/serve/serve_test.py) and the
load benchmark's checks: starts a server on a free port, sends requests as
clients do (http.client) or as hostile ones do (raw sockets), stops it."""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time


class Server:
    """`attn serve --model MODEL --port 0 EXTRA...`, its access log in
    work/serve-NAME.log; the port is read from its first line."""

    def __init__(self, attn, model, work, name, *extra, env=None):
        os.makedirs(work, exist_ok=True)
        self.log_path = os.path.join(work, f"serve-{name}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [attn, "serve", "--model", model, "--port", "0", *extra],
            stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on http://([0-9.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"attn serve did not start: {line!r}; log: {self.read_log()}")
        self.host, self.port = m.group(1), int(m.group(2))

    def read_log(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def connect(self, timeout=120):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, headers dict with lowercase names, body bytes) on a fresh connection."""
        c = self.connect(timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
                headers = dict(headers or {}, **{"Content-Type": "application/json"})
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def translate(self, q, source="en", target="fr", **fields):
        status, _, body = self.request("POST", "/translate",
                                       dict(q=q, source=source, target=target, **fields))
        return status, json.loads(body)

    def raw(self, data, read=True, timeout=120):
        """Sends bytes on a new socket; returns what comes back until the server closes."""
        s = socket.create_connection((self.host, self.port), timeout=timeout)
        try:
            s.sendall(data)
            if not read:
                return b""
            return recv_all(s)
        finally:
            s.close()

    def metric(self, name):
        _, _, body = self.request("GET", "/metrics")
        total = 0.0
        found = False
        for line in body.decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        return total if found else None

    def stop(self, sig=signal.SIGTERM, timeout=120):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.log.close()
        return rc


def recv_all(s):
    chunks = []
    while True:
        try:
            b = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not b:
            break
        chunks.append(b)
    return b"".join(chunks)


def parse_response(raw):
    """(status, headers, body) of the first HTTP response in `raw` bytes."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0]) if lines else None
    if not m:
        return None, {}, raw
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", len(body)))
    return int(m.group(1)), headers, body[:n]


def cli_translations(attn, model, sentences, *flags):
    """`attn translate` on the sentences, one per line, in one process."""
    r = subprocess.run([attn, "translate", "--model", model, *flags], input="\n".join(sentences) + "\n",
                       capture_output=True, text=True, check=True)
    out = r.stdout.split("\n")
    assert out[-1] == "" and len(out) == len(sentences) + 1, r.stdout[-500:]
    return out[:-1]


def test_sources(model, n):
    """The first n held-out test sources of a model directory."""
    with open(os.path.join(model, "data", "test.tsv"), encoding="utf-8") as f:
        return [line.split("\t")[0] for line in f if "\t" in line][:n]


def run_clients(n_clients, work, fn):
    """fn(i) for i in work, on n_clients threads; returns the results in order
    and re-raises the first exception."""
    results = [None] * len(work)
    errors = []
    next_item = [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next_item[0]
                next_item[0] += 1
            if i >= len(work) or errors:
                return
            try:
                results[i] = fn(work[i])
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
                return

    threads = [threading.Thread(target=worker) for _ in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def wait_for(condition, what, limit=120):
    """Polls condition() until it holds; the limit only ends a hung test."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")
