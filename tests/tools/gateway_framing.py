#!/usr/bin/env python3
"""gateway_framing.py PORT TOKEN: requests whose message framing (RFC 9112 section 6) is
unsound, sent over raw sockets to a running idem-gateway with the tool create_note. Each
must get its exact status line and the gateway's problem, in one well-formed answer (one
head, a body of exactly its Content-Length, one "Connection: close"), the connection closed
after it; so must a request line that is not METHOD SP target SP HTTP/x.y. Keys are
frame-*: test-idem-gateway-framing.sh checks that none of them was written. Prints what it
saw; exits 1 when a check fails."""
import json
import socket
import sys

BODY = b'{"text":"a"}'  # 12 bytes


failures = []


def fail(msg):
    """Report a failed check; the others still run."""
    print("FAIL: " + msg, file=sys.stderr)
    failures.append(msg)


def exchange(port, data, timeout=20, half_close=False):
    """Send bytes (then, with @half_close, close the sending side); return what the gateway
    sent and whether it then closed the connection (within @timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    got = b""
    try:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return got, True
            got += chunk
    except socket.timeout:
        return got, False
    except (ConnectionResetError, BrokenPipeError):
        return got, True
    finally:
        s.close()


def post(token, key, headers, body=BODY):
    head = ("POST /v1/tools/create_note HTTP/1.1\r\nHost: x\r\n"
            "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
            "Idempotency-Key: %s\r\n" % (token, key))
    for k, v in headers:
        head += "%s: %s\r\n" % (k, v)
    return head.encode("latin-1") + b"\r\n" + body


def chunked(body=BODY):
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def check(name, data, want_line, want_type=None, port=None, half_close=False):
    """The answer to @data: its status line @want_line, a problem of @want_type (None: not
    checked), one head, nothing after its body, and the connection closed."""
    got, closed = exchange(port, data, half_close=half_close)
    head, _, body = got.partition(b"\r\n\r\n")
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    if line != want_line:
        return fail("%s: status line %r, expected %r (got %r)" % (name, line, want_line,
                                                                  got[:300]))
    if not closed:
        return fail("%s: answered, but the connection was left open (got %r)" % (name, got))
    fields = dict(h.split(b": ", 1) for h in head.split(b"\r\n")[1:] if b": " in h)
    fields = {k.lower(): v for k, v in fields.items()}
    if got.count(b"\r\n\r\n") != 1 or b"\nHTTP/1." in got:
        return fail("%s: not one head: %r" % (name, got))
    if len(body) != int(fields.get(b"content-length", b"-1")):
        return fail("%s: the body is not Content-Length bytes; more followed: %r"
                    % (name, got))
    if want_type is not None:
        closes = [h for h in head.split(b"\r\n")[1:] if h.lower().startswith(b"connection:")]
        if closes != [b"Connection: close"]:
            return fail("%s: Connection headers %r, expected one close" % (name, closes))
        if fields.get(b"content-type") != b"application/problem+json":
            return fail("%s: content type %r" % (name, fields.get(b"content-type")))
        problem = json.loads(body)
        if problem["type"] != "urn:idem:problem:" + want_type or \
                problem["status"] != int(want_line.split()[1]) or not problem["detail"]:
            return fail("%s: problem %r" % (name, problem))
        print("ok: %s: %s: %s" % (name, line, problem["detail"]))
    else:
        print("ok: %s: %r" % (name, line))


def read_answer(s):
    """One answer from socket @s, framed by its Content-Length: (status, fields, body)."""
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a head: %r" % got)
        got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = {k.lower(): v for k, _, v in (h.partition(": ") for h in lines[1:])}
    while len(body) < int(fields.get("content-length", "0")):
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed in a body: %r" % got)
        body += chunk
    return int(lines[0].split()[1]), fields, body


def kept_alive(port, token):
    """Requests one after another on one connection (each request's record is the one the
    previous left, with its body's buffer up to 8 KiB): a long body, a longer one (its buffer
    then freed), a short one, an empty one, a GET; each answered as alone."""
    long_body = json.dumps({"text": "L" * 6000}).encode()
    longer_body = json.dumps({"text": "M" * 12000}).encode()
    steps = [
        ("a long body", post(token, "alive-1", [("Content-Length", str(len(long_body)))],
                             long_body), 201),
        ("a longer body after it",
         post(token, "alive-2", [("Content-Length", str(len(longer_body)))], longer_body), 201),
        ("a short body after it", post(token, "alive-3", [("Content-Length", "12")],
                                       b'{"text":"s"}'), 201),
        ("an empty body after it", post(token, "alive-4", [("Content-Length", "0")], b""), 400),
        ("a GET after it", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200),
    ]
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        for name, data, want in steps:
            s.sendall(data)
            status, fields, body = read_answer(s)
            if status != want:
                return fail("kept alive, %s: %d, expected %d: %r" % (name, status, want, body))
            if fields.get("connection", "").lower() == "close":
                return fail("kept alive, %s: the connection closed" % name)
            if name == "an empty body after it" and \
                    json.loads(body)["type"] != "urn:idem:problem:invalid-arguments":
                return fail("kept alive, %s: %r" % (name, body))
            print("ok: kept alive, %s: %d" % (name, status))
    except (OSError, ValueError) as e:
        fail("kept alive: %s" % e)
    finally:
        s.close()


def main():
    port, token = int(sys.argv[1]), sys.argv[2]
    bad, ni = "HTTP/1.1 400 Bad Request", "HTTP/1.1 501 Not Implemented"
    cl = "Content-Length"
    te = "Transfer-Encoding"
    cases = [
        # The gateway's own answers: a problem.
        ("two Content-Length values, 12 then 5",
         post(token, "frame-1", [(cl, "12"), (cl, "5")]), bad, "invalid-framing"),
        ("two Content-Length values, 5 then 12",
         post(token, "frame-2", [(cl, "5"), (cl, "12")]), bad, "invalid-framing"),
        ("the same Content-Length twice",
         post(token, "frame-3", [(cl, "12"), (cl, "12")]), bad, "invalid-framing"),
        ("a valid Content-Length then a word",
         post(token, "frame-4", [(cl, "12"), (cl, "abc")]), bad, "invalid-framing"),
        ("a Content-Length of 22 digits with leading zeros",
         post(token, "frame-5", [(cl, "0" * 20 + "12")]), bad, "invalid-framing"),
        ("a Content-Length of 20 digits",
         post(token, "frame-6", [(cl, "10000000000000000000")]), bad, "invalid-framing"),
        ("Transfer-Encoding gzip, chunked",
         post(token, "frame-7", [(te, "gzip, chunked")], chunked()), ni,
         "transfer-encoding-not-implemented"),
        ("Transfer-Encoding chunked, gzip",
         post(token, "frame-8", [(te, "chunked, gzip")], chunked()), ni,
         "transfer-encoding-not-implemented"),
        ("Transfer-Encoding gzip", post(token, "frame-9", [(te, "gzip")]), ni,
         "transfer-encoding-not-implemented"),
        ("Transfer-Encoding identity", post(token, "frame-10", [(te, "identity")]), ni,
         "transfer-encoding-not-implemented"),
        ("two Transfer-Encoding headers",
         post(token, "frame-11", [(te, "chunked"), (te, "chunked")], chunked()), bad,
         "invalid-framing"),
        ("Transfer-Encoding gzip, then chunked",
         post(token, "frame-12", [(te, "gzip"), (te, "chunked")], chunked()), bad,
         "invalid-framing"),
        ("Transfer-Encoding and Content-Length",
         post(token, "frame-13", [(te, "chunked"), (cl, "12")], chunked()), bad,
         "invalid-framing"),
        ("Content-Length and Transfer-Encoding",
         post(token, "frame-14", [(cl, "12"), (te, "chunked")], chunked()), bad,
         "invalid-framing"),
        # First values libmicrohttpd 0.9.75 would answer itself, malformed (its head twice):
        # the gateway's front answers them from the raw head first.
        ("a Content-Length list", post(token, "frame-15", [(cl, "5, 12")]), bad,
         "invalid-framing"),
        ("a negative Content-Length", post(token, "frame-16", [(cl, "-12")]), bad,
         "invalid-framing"),
        ("a Content-Length past 64 bits",
         post(token, "frame-17", [(cl, "123456789012345678901234567890")]), bad,
         "invalid-framing"),
        ("a Content-Length of digits then a letter", post(token, "frame-18", [(cl, "12x")]),
         bad, "invalid-framing"),
        # A request line that is not METHOD SP target SP HTTP/x.y; libmicrohttpd 0.9.75
        # closes one without a space unanswered.
        ("GARBAGE", b"GARBAGE\r\n\r\n", bad, "invalid-request-line"),
        ("GET alone", b"GET\r\n\r\n", bad, "invalid-request-line"),
        ("a request line without a version", b"GET /healthz\r\n\r\n", bad,
         "invalid-request-line"),
        ("a request line with a bad version", b"GET /healthz HTTP/1\r\nHost: x\r\n\r\n",
         bad, "invalid-request-line"),
    ]
    for name, data, line, ptype in cases:
        check(name, data, line, ptype, port)
    # A head the client ends by closing its side: judged as it is, at once.
    check("a request line, then the client's close", b"GARBAGE\r\n", bad,
          "invalid-request-line", port, half_close=True)
    # Sound framing: created, both ways.
    check("Content-Length", post(token, "good-cl", [(cl, "12"), ("Connection", "close")]),
          "HTTP/1.1 201 Created", None, port)
    check("Transfer-Encoding: CHUNKED",
          post(token, "good-chunked", [(te, "CHUNKED"), ("Connection", "close")], chunked()),
          "HTTP/1.1 201 Created", None, port)
    kept_alive(port, token)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
