#!/usr/bin/env python3
"""attn serve from outside, as its clients see it.

  serve_test.py --attn ATTN --model DIR --work DIR CHECK

CHECK is one of:
  same-as-cli  the held-out test sources, sent by 8 clients at once (greedy
               and beam-search requests mixed, one sentence or lists of
               them, so that they share decoding steps, in batches of at
               most 2 sentences' rows), and then one at a time (a loop
               alone on both threads), answered exactly as `attn
               translate` answers them in one process; a paragraph is the
               translations of its sentences, joined as written.
  hostile      the table of hostile and broken requests (hostile_cases.py):
               each answered with its status and a JSON error, and a good
               request answered correctly after each one.
  limits       API keys (403), --req-limit (429 + Retry-After), a full
               queue (503 + Retry-After), --request-timeout (503), CORS.
  slow         a client that sends its headers one byte at a time
               (slowloris) and one whose chunked body stops: others are
               answered meanwhile, the server closes both at --read-timeout.
  disconnect   a client that leaves while its long request decodes: its
               sentences leave the batch (counted), the server goes on.
  connections  as many idle connections as the descriptors allow, up to
               10,000, beyond --max-connections: the extra ones refused with
               503, the server alive, answering once they close.
  signals      SIGTERM while a request decodes: it is answered, the process
               exits 0; a second signal during the grace ends it at once.
  load         N requests over C connections (bounded), every answer equal
               to the CLI's (run under ASan + UBSan by the asan preset).
No check measures time: waits are bounded only to end a hung test.
"""

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import (Server, cli_translations, parse_response, recv_all,  # noqa: E402
                          run_clients, test_sources, wait_for)
import hostile_cases  # noqa: E402

GOOD = "I'm home."


class Check:
    def __init__(self):
        self.failures = 0

    def __call__(self, ok, what):
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
        if not ok:
            self.failures += 1
        return ok


def stopped(server, check):
    """SIGTERM: the server exits 0, with no sanitizer report in its log."""
    rc = server.stop()
    log = server.read_log()
    clean = "Sanitizer" not in log and "runtime error" not in log
    return check(rc == 0 and clean, f"the server exits {rc} at SIGTERM"
                 + ("" if clean else ", with a sanitizer report in its log"))


def good_request(server, expected, check, after):
    status, j = server.translate(GOOD)
    return check(status == 200 and j.get("translatedText") == expected,
                 f"after {after}: the good request answered {status} {j!r:.120}")


def same_as_cli(a, check):
    sources = test_sources(a.model, 60)
    beam = cli_translations(a.attn, a.model, sources)
    greedy = cli_translations(a.attn, a.model, sources, "--beam-size", "1")
    check(len(set(beam)) > 5, f"the model gives {len(set(beam))} different translations")
    # Two loops on two threads; batches of at most 2 sentences' rows, so
    # that sentences also wait for rows.
    server = Server(a.attn, a.model, a.work, "same-as-cli", "--threads", "2",
                    "--max-batch-size", "2")
    try:
        # Each item: (kind, indices); kinds alternate so that greedy and beam
        # sentences, lists and single strings share steps.
        work = []
        for i in range(len(sources)):
            work.append(("beam" if i % 2 else "greedy", [i]))
        for i in range(0, len(sources), 7):
            work.append(("beam-list", list(range(i, min(i + 7, len(sources))))))

        def send(item):
            kind, idx = item
            if kind == "greedy":
                status, j = server.translate(sources[idx[0]], beam_size=1)
                return status, [j.get("translatedText")], [greedy[idx[0]]]
            if kind == "beam":
                status, j = server.translate(sources[idx[0]])
                return status, [j.get("translatedText")], [beam[idx[0]]]
            status, j = server.translate([sources[i] for i in idx])
            return status, j.get("translatedText"), [beam[i] for i in idx]

        for status, got, want in run_clients(8, work, send):
            if not check(status == 200 and got == want, f"{got!r:.80} == CLI {want!r:.80}"):
                break
        # No step fed more rows than 2 sentences of beam 4 have.
        steps = server.metric("attn_batch_rows_per_step_count")
        within = server.metric('attn_batch_rows_per_step_bucket{le="8"}')
        check(steps and within == steps, f"{within} of {steps} steps fed at most 8 rows")
        # One request at a time: the first loop alone, on both threads.
        for i in range(6):
            status, j = server.translate(sources[i])
            check(status == 200 and j.get("translatedText") == beam[i],
                  f"alone: {j.get('translatedText')!r:.80} == CLI {beam[i]!r:.80}")
        # A paragraph: its sentences translated one by one, spaces kept.
        para = "  " + sources[0] + " " + sources[1] + "\n" + sources[2] + " "
        status, j = server.translate(para)
        want = "  " + beam[0] + " " + beam[1] + "\n" + beam[2] + " "
        check(status == 200 and j.get("translatedText") == want,
              f"a paragraph: {j.get('translatedText')!r:.100} == {want!r:.100}")
        # alternatives: the beam's next best, the best first as translatedText.
        status, j = server.translate(sources[3], alternatives=2)
        alts = j.get("alternatives")
        check(status == 200 and j.get("translatedText") == beam[3] and isinstance(alts, list)
              and len(alts) <= 2 and beam[3] not in alts, f"alternatives: {j!r:.160}")
    finally:
        stopped(server, check)


def hostile(a, check):
    expected = cli_translations(a.attn, a.model, [GOOD])[0]
    server = Server(a.attn, a.model, a.work, "hostile", "--batch-limit", "1000", "--char-limit",
                    "100000", "--read-timeout", "3")
    try:
        cases = hostile_cases.CASES
        check(len(cases) >= 30, f"{len(cases)} hostile cases")
        for case in cases:
            name, status, err = case.run(server)
            ok = status == case.status and (case.status in (204, 200) or err)
            check(ok, f"{case.name}: {status} (expected {case.status}) {name}")
            good_request(server, expected, check, case.name)
        check(server.proc.poll() is None, "the server is still running")
    finally:
        stopped(server, check)


def limits(a, check):
    keys = os.path.join(a.work, "keys.txt")
    with open(keys, "w") as f:
        f.write("# keys of the test\nsecret-1\n  secret-2  \n")
    server = Server(a.attn, a.model, a.work, "limits", "--api-keys", keys, "--req-limit", "5",
                    "--max-queue", "2", "--cors-origin", "https://example.org")
    try:
        status, j = server.translate(GOOD)
        check(status == 403 and "API key" in j.get("error", ""), f"no key: {status} {j}")
        status, j = server.translate(GOOD, api_key="wrong")
        check(status == 403 and j.get("error") == "Invalid API key", f"a wrong key: {status} {j}")
        status, j = server.translate(GOOD, api_key="secret-2")
        check(status == 200, f"a key with spaces around it in the file: {status} {j}")
        status, _, body = server.request("POST", "/translate", dict(
            q=["a.", "b.", "c."], source="en", target="fr", api_key="secret-1"))
        status_q, headers_q = status, None
        check(status == 503 and b"busy" in body, f"3 sentences for a queue of 2: {status} {body!r}")
        # Four requests so far; the fifth passes, the sixth is over the limit.
        status, _, _ = server.request("GET", "/languages")
        check(status == 200, "GET /languages is not limited")
        status, j = server.translate(GOOD, api_key="secret-1")
        check(status == 200, f"the fifth: {status}")
        status, headers, body = server.request("POST", "/translate", dict(
            q=GOOD, source="en", target="fr", api_key="secret-1"))
        check(status == 429 and int(headers.get("retry-after", "0")) >= 1,
              f"the sixth in a minute: {status} {headers.get('retry-after')} {body!r}")
        status, headers, body = server.request("GET", "/health")
        decoding = json.loads(body).get("decoding", {})
        check(status == 200 and decoding.get("quantize") in ("int8", "none")
              and decoding.get("int8_products") and decoding.get("attention_kernels"),
              f"/health says how it decodes: {decoding}")
        check(headers.get("access-control-allow-origin") == "https://example.org",
              f"CORS origin: {headers.get('access-control-allow-origin')}")
        log = server.read_log()
        check("secret" not in log, "no key in the access log")
        del status_q, headers_q
    finally:
        stopped(server, check)
    sources = test_sources(a.model, 50)
    server = Server(a.attn, a.model, a.work, "timeout", "--request-timeout", "0.001")
    try:
        status, headers, body = server.request("POST", "/translate",
                                               dict(q=sources, source="en", target="fr"))
        check(status == 503 and "retry-after" in headers and b"longer" in body,
              f"50 sentences in 1 ms: {status} {body!r:.100}")
    finally:
        stopped(server, check)


def slow(a, check):
    expected = cli_translations(a.attn, a.model, [GOOD])[0]
    server = Server(a.attn, a.model, a.work, "slow", "--read-timeout", "2")
    try:
        lor = socket.create_connection((server.host, server.port), timeout=120)
        lor.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\n")
        stalled = socket.create_connection((server.host, server.port), timeout=120)
        stalled.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"q\":\r\n")
        # Others are answered while both are open (a header byte now and then).
        for i in range(4):
            lor.sendall(b"X")
            good_request(server, expected, check, f"slowloris byte {i}")
        # The server ends both at --read-timeout (the wait is only bounded).
        for sock, what in ((lor, "slowloris"), (stalled, "a chunked body that stops")):
            sock.settimeout(120)
            rest = recv_all(sock)
            check(True, f"{what}: closed by the server ({len(rest)} bytes)")
            sock.close()
        good_request(server, expected, check, "both closed")
    finally:
        stopped(server, check)


def disconnect(a, check):
    expected = cli_translations(a.attn, a.model, [GOOD])[0]
    sources = test_sources(a.model, 30)
    server = Server(a.attn, a.model, a.work, "disconnect", "--batch-limit", "5000",
                    "--char-limit", "1000000", "--max-queue", "100000")
    try:
        # Long enough to be decoding when its client leaves: 3,000 sentences
        # at beam 8 take many steps on any machine, slower ones only more.
        body = json.dumps(dict(q=sources * 100, source="en", target="fr", beam_size=8)).encode()
        s = socket.create_connection((server.host, server.port), timeout=120)
        s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        wait_for(lambda: (server.metric("attn_batch_sentences") or 0) > 0, "decoding started")
        s.close()
        wait_for(lambda: (server.metric('attn_sentences_dropped_total{reason="cancelled"}') or 0)
                 > 0, "the request's sentences dropped")
        wait_for(lambda: server.metric("attn_batch_sentences") == 0, "the batch emptied")
        dropped = server.metric('attn_sentences_dropped_total{reason="cancelled"}')
        check(dropped > 0, f"{dropped:.0f} sentences left the batch with their client")
        good_request(server, expected, check, "the client left")
    finally:
        stopped(server, check)


def connections(a, check):
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    except (ValueError, OSError):
        pass
    n = min(10000, soft - 100)
    cap = min(200, n // 2)
    check(n > cap, f"{n} connections for a cap of {cap} (ulimit -n {soft})")
    expected = cli_translations(a.attn, a.model, [GOOD])[0]
    server = Server(a.attn, a.model, a.work, "connections", "--max-connections", str(cap),
                    "--read-timeout", "600")
    socks = []
    try:
        for _ in range(n):
            try:
                socks.append(socket.create_connection((server.host, server.port), timeout=120))
            except OSError as e:  # the listen queue full: the kernel refuses, not the server
                print(f"connect: {e}")
                break
        refused = 0
        for s in socks[cap + 50:]:
            s.settimeout(120)
            got = recv_all(s)
            status, _, body = parse_response(got)
            refused += status == 503 and b"too many connections" in body
        check(refused == len(socks) - cap - 50,
              f"{refused} of the {len(socks) - cap - 50} connections past the cap refused with 503")
        check(server.proc.poll() is None, f"the server alive with {len(socks)} connections made")
        for s in socks:
            s.close()
        socks = []
        wait_for(lambda: server.request("GET", "/health")[0] == 200, "a free connection")
        good_request(server, expected, check, "the connections closed")
    finally:
        for s in socks:
            s.close()
        stopped(server, check)


def signals(a, check):
    sources = test_sources(a.model, 30)
    server = Server(a.attn, a.model, a.work, "signals", "--grace", "600", "--batch-limit", "5000",
                    "--char-limit", "1000000", "--max-queue", "100000")
    result = {}

    def long_request():
        result["answer"] = server.request("POST", "/translate",
                                          dict(q=sources * 20, source="en", target="fr"))

    t = threading.Thread(target=long_request)
    t.start()
    wait_for(lambda: (server.metric("attn_batch_sentences") or 0) > 0 or "answer" in result,
             "decoding started")
    server.proc.send_signal(signal.SIGTERM)
    rc = server.proc.wait(timeout=600)
    t.join()
    status, _, body = result["answer"]
    answers = json.loads(body).get("translatedText") if status == 200 else None
    check(status == 200 and isinstance(answers, list) and len(answers) == len(sources) * 20,
          f"the request in flight at SIGTERM answered: {status}")
    check(rc == 0, f"exit {rc} after SIGTERM")
    stopped(server, check)
    # A second signal during the grace: out at once.
    server = Server(a.attn, a.model, a.work, "signals-2", "--grace", "600", "--batch-limit", "5000",
                    "--char-limit", "1000000", "--max-queue", "100000")
    def endless():  # 4,500 sentences at beam 8: still decoding at the second signal
        try:
            server.request("POST", "/translate",
                           dict(q=sources * 150, source="en", target="fr", beam_size=8))
        except OSError:
            pass  # the server is gone: the point

    t = threading.Thread(target=endless)
    t.daemon = True
    t.start()
    wait_for(lambda: (server.metric("attn_batch_sentences") or 0) > 0, "decoding started")
    server.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "stopping" in server.read_log(), "the first signal seen")
    server.proc.send_signal(signal.SIGINT)
    rc = server.proc.wait(timeout=120)
    check(rc == 128 + signal.SIGINT, f"exit {rc} at the second signal (expected 130)")
    server.stop()


def load(a, check):
    sources = test_sources(a.model, 40)
    expected = cli_translations(a.attn, a.model, sources)
    server = Server(a.attn, a.model, a.work, "load")
    try:
        work = [i % len(sources) for i in range(a.requests)]

        def send(i):
            status, j = server.translate(sources[i])
            return status == 200 and j.get("translatedText") == expected[i]

        ok = run_clients(a.clients, work, send)
        check(all(ok), f"{sum(ok)} of {len(ok)} answers equal to the CLI's "
                       f"({a.clients} connections)")
    finally:
        stopped(server, check)


CHECKS = {"same-as-cli": same_as_cli, "hostile": hostile, "limits": limits, "slow": slow,
          "disconnect": disconnect, "connections": connections, "signals": signals, "load": load}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--attn", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("check", choices=sorted(CHECKS))
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    check = Check()
    CHECKS[a.check](a, check)
    if check.failures:
        print(f"{check.failures} checks failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
