#!/usr/bin/env python3
"""gateway_clients.py COMMAND PORT ...: clients that test-idem-gateway-ops.sh points at a
running idem-gateway on the loopback address. Each prints what it saw and exits 1 when a
check fails.

  idle PORT N PID TOKEN CALLS  hold N idle connections open, then make CALLS calls of
                               create_note (8 at a time) with keys idle-1..; all must
                               answer 201; print the gateway's RSS (VmRSS of PID) with the
                               connections open, and check they are still open after
  hostile PORT TOKEN           oversized and malformed requests: each a clear 4xx, and the
                               gateway still answers a good call after them
  slow PORT                    a client trickling its headers, another its body: both cut
                               (the connection closed) well before a minute
  limit PORT MAX               MAX connections held, one more closed at once
"""
import http.client
import json
import resource
import socket
import sys
import threading
import time


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def raw(port, data, timeout=30):
    """Send bytes, return the status line's code (0 when the connection closed first)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        got = b""
        while b"\r\n" not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except (ConnectionResetError, BrokenPipeError):
        return 0
    finally:
        s.close()
    parts = got.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def call(port, token, key, body, extra=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    headers.update(extra or {})
    c.request("POST", "/v1/tools/create_note", body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def rss_kib(pid):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def idle(port, n, pid, token, ncalls):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    before = rss_kib(pid)
    conns = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(n)]
    # Every connection accepted: the gateway counts them open.
    for _ in range(600):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
        open_now = [l for l in text.splitlines() if l.startswith("idem_gateway_connections_open ")]
        if open_now and float(open_now[0].split()[1]) >= n:
            break
        time.sleep(0.1)
    else:
        fail("the gateway does not count %d connections open" % n)
    held = rss_kib(pid)
    results = []
    lock = threading.Lock()

    def worker(keys):
        for k in keys:
            st, _ = call(port, token, k, json.dumps({"text": "load " + k}))
            with lock:
                results.append(st)

    keys = ["idle-%d" % i for i in range(1, ncalls + 1)]
    threads = [threading.Thread(target=worker, args=(keys[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("RSS of the gateway: %d KiB before, %d KiB with %d idle connections open, %d KiB "
          "after %d calls" % (before, held, n, rss_kib(pid), ncalls))
    if results.count(201) != ncalls:
        fail("calls with %d idle connections open: %s" % (n, sorted(set(results))))
    # The idle connections are still open: a request on one is answered.
    conns[0].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    if not conns[0].recv(64).startswith(b"HTTP/1.1 200"):
        fail("an idle connection was not served after the calls")
    for s in conns:
        s.close()
    print("ok: %d calls answered 201 with %d idle connections open" % (ncalls, n))


def expect(name, got, want):
    if got != want:
        fail("%s: HTTP %s, expected %s" % (name, got, want))
    print("ok: %s: %s" % (name, got))


def request(path, headers, body=b""):
    head = "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" % path
    for k, v in headers:
        head += "%s: %s\r\n" % (k, v)
    if body is not None:
        head += "Content-Length: %d\r\n" % len(body)
    return head.encode("latin-1") + b"\r\n" + (body or b"")


def hostile(port, token):
    auth = ("Authorization", "Bearer " + token)
    ctype = ("Content-Type", "application/json")
    path = "/v1/tools/create_note"
    good = json.dumps({"text": "fine"}).encode()
    cases = [
        ("headers over the limit", request(path, [auth, ctype, ("Idempotency-Key", "h1"),
                                                  ("X-Filler", "a" * 70000)], good), 431),
        ("a body over max_body_bytes", request(path, [auth, ctype, ("Idempotency-Key", "h2")],
                                               b'{"text": "' + b"a" * 70000 + b'"}'), 413),
        ("a chunked body over max_body_bytes",
         request(path, [auth, ctype, ("Idempotency-Key", "h3"), ("Transfer-Encoding", "chunked")],
                 None) + b"".join(b"%x\r\n%s\r\n" % (8192, b"a" * 8192) for _ in range(10))
         + b"0\r\n\r\n", 413),
        # libmicrohttpd answers this itself, while the gateway reads the request.
        ("a malformed chunked body",
         request(path, [auth, ctype, ("Idempotency-Key", "bad-chunk"),
                        ("Transfer-Encoding", "chunked")], None) + b"zz\r\nabc\r\n0\r\n\r\n",
         400),
        ("a body that is not JSON", request(path, [auth, ctype, ("Idempotency-Key", "h4")],
                                            b'{"text": '), 400),
        ("a body of invalid UTF-8", request(path, [auth, ctype, ("Idempotency-Key", "h5")],
                                            b'{"text": "\xff\xfe\xc3("}'), 400),
        ("a body with a NUL", request(path, [auth, ctype, ("Idempotency-Key", "h6")],
                                      b'{"text": "a\x00b"}'), 400),
        ("a 10 KB key", request(path, [auth, ctype, ("Idempotency-Key", "k" * 10240)], good), 400),
        ("a key with a control character", request(path, [auth, ctype,
                                                          ("Idempotency-Key", "\"a\x01b\"")],
                                                   good), 400),
        ("a key with DEL", request(path, [auth, ctype, ("Idempotency-Key", "a\x7fb")], good), 400),
        ("a header without a colon", request(path, [auth, ctype, ("Idempotency-Key", "h7")], good)
         .replace(b"Host: x\r\n", b"Host: x\r\nno colon here\r\n"), 400),
        ("a tool name of invalid UTF-8", request("/v1/tools/%FF%FEx%01", [auth, ctype,
                                                  ("Idempotency-Key", "h9")], good), 404),
        ("an MCP tool name cut inside a character",
         request("/mcp", [auth, ctype], json.dumps(
             {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "a" * 63 + "\u00e9", "arguments": {}}}).encode()), 200),
        # A method must be a token: the gateway's front refuses the request line.
        ("a method of control characters", request(path, [auth, ctype], good)
         .replace(b"POST", b"P\x01ST", 1), 400),
        ("a request line that is not HTTP", b"HELLO THERE\r\n\r\n", 400),
        ("an HTTP version that is not 1.x", b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", 505),
        # A TLS handshake to the plain port (its NUL bytes): closed without an answer.
        ("a TLS ClientHello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 0),
        ("a request target of 40 KB", b"GET /" + b"a" * 40000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
         414),
        ("a Content-Length that is not a number",
         request(path, [auth, ctype, ("Idempotency-Key", "h8"), ("Content-Length", "12x")], None)
         + good, 400),
    ]
    for name, data, want in cases:
        got = raw(port, data)
        if want in (431, 414) and got in (413, 414, 431):
            got = want  # libmicrohttpd's own answer to a head too large: any of these
        expect(name, got, want)
        st, _ = call(port, token, "after-" + str(abs(hash(name)) % 100000), good)
        if st != 201:
            fail("after %s: a good call answered %s" % (name, st))
    print("ok: the gateway answered a good call after each")


def cut_within(port, data_first, trickle, limit_s=60):
    s = socket.create_connection(("127.0.0.1", port), timeout=limit_s)
    start = time.monotonic()
    s.sendall(data_first)
    try:
        while time.monotonic() - start < limit_s:
            s.sendall(trickle)
            time.sleep(0.5)
    except (BrokenPipeError, ConnectionResetError):
        return time.monotonic() - start
    finally:
        s.close()
    return None


def slow(port):
    head = cut_within(port, b"POST /v1/tools/create_note HTTP/1.1\r\n", b"X-Slow: a\r\n")
    if head is None:
        fail("a client trickling its headers for a minute was not cut")
    print("ok: a client trickling its headers was cut after %.0f s" % head)
    body = cut_within(port, b"POST /v1/tools/create_note HTTP/1.1\r\nHost: x\r\n"
                      b"Authorization: Bearer x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100000\r\n\r\n", b"a")
    if body is None:
        fail("a client trickling its body for a minute was not cut")
    print("ok: a client trickling its body was cut after %.0f s" % body)


def limit(port, most):
    conns = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(most)]
    for s in conns:  # each one served: all accepted
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        if not s.recv(64).startswith(b"HTTP/1.1 200"):
            fail("a connection under the limit was not served")
    extra = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = extra.recv(64)
    except ConnectionResetError:
        got = b""
    if got != b"":
        fail("a connection over the limit was served: %r" % got)
    extra.close()
    for s in conns:
        s.close()
    print("ok: connection %d of a limit of %d was closed at once" % (most + 1, most))


def main():
    cmd, port = sys.argv[1], int(sys.argv[2])
    if cmd == "idle":
        idle(port, int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6]))
    elif cmd == "hostile":
        hostile(port, sys.argv[3])
    elif cmd == "slow":
        slow(port)
    elif cmd == "limit":
        limit(port, int(sys.argv[3]))
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    main()
