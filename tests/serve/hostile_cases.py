"""The table of hostile and broken requests for `attn serve`
(serve_test.py hostile). Each case sends one request and says what came
back: (a note, the status, whether the body is LibreTranslate's JSON error
{"error": "..."}). The server runs with --read-timeout 3, --batch-limit 1000
and --char-limit 100000."""

import json
import socket

from serve_client import parse_response, recv_all


def json_error(body):
    try:
        j = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(j, dict) and isinstance(j.get("error"), str) and len(j) == 1


class Case:
    def __init__(self, name, status, send):
        self.name, self.status, self.send = name, status, send

    def run(self, server):
        status, headers, body = self.send(server)
        return f"{body[:90]!r}", status, json_error(body)


def post(path, body, content_type="application/json"):
    def send(server):
        data = body if isinstance(body, bytes) else body.encode()
        return server.request("POST", path, data, {"Content-Type": content_type})
    return send


def fields(**f):
    return post("/translate", json.dumps(dict({"source": "en", "target": "fr"}, **f)))


def method(m, path):
    return lambda server: server.request(m, path)


def raw(data):
    def send(server):
        return parse_response(server.raw(data))
    return send




def big_body(server):
    # 10 MB, more than --max-body-bytes: refused after the headers; the
    # rest is read and dropped, so the client can send it all and read.
    body = b'{"q": "' + b"a" * (10 << 20) + b'", "source": "en", "target": "fr"}'
    return parse_response(server.raw(b"POST /translate HTTP/1.1\r\nHost: x\r\n"
                                     b"Content-Type: application/json\r\nContent-Length: " +
                                     str(len(body)).encode() + b"\r\n\r\n" + body))


def endless_chunks(server):
    # A chunked body that goes on past the body limit: 413, the connection closed.
    s = socket.create_connection((server.host, server.port), timeout=120)
    try:
        s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"10000\r\n" + b"a" * 0x10000 + b"\r\n"
        try:
            for _ in range(64):  # 4 MB, past the 1 MB limit
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return parse_response(recv_all(s))
    finally:
        s.close()


def many_strings(server):
    body = json.dumps({"q": ["a"] * 100000, "source": "en", "target": "fr"})
    return server.request("POST", "/translate", body.encode(), {"Content-Type": "application/json"})


def html_script(server):
    html = '<p>I am <b>home.<script>alert("x")</script><div class="a">Hello'
    status, headers, body = fields(q=html, format="html")(server)
    text = json.loads(body).get("translatedText", "") if status == 200 else ""
    # The markup is kept as written, the script's text untouched; only text nodes change.
    kept = text.startswith("<p>") and '<script>alert("x")</script><div class="a">' in text
    return (status if kept else 599), headers, body


def deep_json(server):
    body = b'{"q": ' + b"[" * 100000 + b"]" * 100000 + b"}"
    return server.request("POST", "/translate", body, {"Content-Type": "application/json"})


CASES = [
    Case("malformed JSON", 400, post("/translate", '{"q": "Hello.", "source": "en",')),
    Case("JSON that is not an object", 400, post("/translate", '["Hello."]')),
    Case("JSON nested 100,000 deep", 400, deep_json),
    Case("a key twice", 400, post("/translate", '{"q": "a.", "q": "b.", "source": "en", '
                                                '"target": "fr"}')),
    Case("q missing", 400, fields()),
    Case("q empty", 400, fields(q="")),
    Case("q an empty list", 400, fields(q=[])),
    Case("q a number", 400, fields(q=42)),
    Case("q a list with an object", 400, fields(q=["Hello.", {"a": 1}])),
    Case("source missing", 400, post("/translate", json.dumps({"q": "Hello.", "target": "fr"}))),
    Case("target an object", 400, fields(q="Hello.", target={"x": 1})),
    Case("invalid UTF-8 in JSON", 400, post("/translate", b'{"q": "\xff\xfe", "source": "en", '
                                                          b'"target": "fr"}')),
    Case("invalid UTF-8 in form data", 400,
         post("/translate", "q=%FF%FE&source=en&target=fr", "application/x-www-form-urlencoded")),
    Case("bad percent-encoding", 400,
         post("/translate", "q=%G1&source=en&target=fr", "application/x-www-form-urlencoded")),
    Case("multipart form data", 400,
         post("/translate", "--b\r\n", "multipart/form-data; boundary=b")),
    Case("a body of type text/plain", 400, post("/translate", "Hello.", "text/plain")),
    Case("a 10 MB body", 413, big_body),
    Case("an array of 100,000 strings", 400, many_strings),
    Case("an unknown source language", 400, fields(q="Hello.", source="xx")),
    Case("an unknown target language", 400, fields(q="Hello.", target="zz")),
    Case("equal languages", 400, fields(q="Hello.", source="fr", target="fr")),
    Case("a source language that is no code", 400, fields(q="Hello.", source="\u00e9\n<b>")),
    Case("HTML with unclosed tags and a script", 200, html_script),
    Case("format pdf", 400, fields(q="Hello.", format="pdf")),
    Case("alternatives -1", 400, fields(q="Hello.", alternatives=-1)),
    Case("beam_size 0", 400, fields(q="Hello.", beam_size=0)),
    Case("beam_size a word", 400, fields(q="Hello.", beam_size="many")),
    Case("length_penalty NaN", 400, post("/translate", '{"q": "Hello.", "source": "en", '
                                                       '"target": "fr", "length_penalty": NaN}')),
    Case("a sentence longer than the model", 400, fields(q="word " * 5000)),
    Case("a chunked body that never ends", 413, endless_chunks),
    Case("headers over the limit", 431,
         raw(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n")),
    Case("a request line that is not HTTP", 400, raw(b"HELLO THERE\r\n\r\n")),
    Case("a bad chunk size", 400, raw(b"POST /translate HTTP/1.1\r\nHost: x\r\n"
                                      b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")),
    Case("a Content-Length that is no number", 400,
         raw(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             b"Content-Length: 2x\r\n\r\n{}")),
    Case("two Content-Lengths that differ", 400,
         raw(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}")),
    Case("HEAD /languages", 200, method("HEAD", "/languages")),
    Case("OPTIONS /translate", 204, method("OPTIONS", "/translate")),
    Case("PUT /translate", 405, method("PUT", "/translate")),
    Case("GET /translate", 405, method("GET", "/translate")),
    Case("DELETE /", 405, method("DELETE", "/")),
    Case("a path with ..", 404, method("GET", "/../../etc/passwd")),
    Case("a path with .. to a route", 404, method("POST", "/frontend/../translate")),
    Case("an unknown path", 404, method("GET", "/static/app.js")),
    Case("/detect without q", 400, post("/detect", '{}')),
]
