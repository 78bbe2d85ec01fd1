#!/usr/bin/env python3
"""upstream.py PORT-FILE [CERT KEY]: an HTTP service for idem-gateway's http tools, on a free
loopback port written to PORT-FILE (HTTPS with CERT and KEY). It records every request it receives (method, path, headers,
Idempotency-Key, body) and answers each by the next action scripted for its path:

  ok      act, 200 with a JSON document naming the action
  text    act, 202 text/plain
  refuse  422 with a JSON body of irregular spacing (bytes to compare)
  binary  400 with bytes that are not UTF-8
  fail    503
  hang    no answer until released
  drop    act, then close the connection without an answer
  hold    act, then answer only once released (the answer may find nobody)


With no action left it does "ok". A path that honours keys (the default) acts once per
Idempotency-Key: a request with a key it has acted on gets the first answer again.

Status requests: GET PATH/status/KEY asks what became of KEY at PATH, answered from what
was really done there: 200 {"state": "sent", "message": FIRST-ANSWER} when it acted on
KEY, 404 {"error": "no such message"} when not; or by the next status action scripted for
PATH: record (that answer), refused (410 {"error": "bounced"}), fail (500), garbage (200
with a body that is not JSON), hang (no answer until released), gather N (hold until N
status requests for PATH scripted "gather N" have arrived, then the record's answer).

Control: POST /_script {"path", "actions", "honour"}; POST /_status {"path", "actions"};
GET /_log (the requests received, "acts": the actions by path, "status": the status
requests); POST /_release (every hang and hold ends).
"""
import json
import os
import ssl
import sys
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

lock = threading.Lock()
released = threading.Event()
scripts = {}  # path: deque of actions
honour = {}  # path: bool
answers = {}  # (path, key): (status, content type, bytes)
acts = {}  # path: actions taken
log = []
status_scripts = {}  # path: deque of status actions
status_log = []  # {"path", "key", "action"}
status_hangs = []  # the events hung status requests wait for
arrived = threading.Condition(lock)

REFUSAL = b'{"error" :  "invalid recipient",\n "code": 7}'
BINARY = b"\xff\x00\xfe refused"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, ctype, data):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def control(self, data):
        if self.path == "/_log":
            with lock:
                doc = json.dumps({"requests": log, "acts": acts, "status": status_log}).encode()
            return self.send(200, "application/json", doc)
        if self.path == "/_release":
            released.set()
            with lock:
                for ev in status_hangs:
                    ev.set()
            return self.send(200, "application/json", b"{}")
        if self.path == "/_status":
            d = json.loads(data)
            with lock:
                status_scripts[d["path"]] = deque(d.get("actions", []))
            return self.send(200, "application/json", b"{}")
        if self.path == "/_script":
            d = json.loads(data)
            with lock:
                scripts[d["path"]] = deque(d.get("actions", []))
                honour[d["path"]] = d.get("honour", True)
            return self.send(200, "application/json", b"{}")
        return self.send(404, "text/plain", b"no such control")

    def act(self, path, key, status, ctype, data):
        with lock:
            acts[path] = acts.get(path, 0) + 1
            answers[(path, key)] = (status, ctype, data)

    def status(self, path, key):
        with lock:
            script = status_scripts.setdefault(path, deque())
            action = script.popleft() if script else "record"
            entry = {"path": path, "key": key, "action": action}
            status_log.append(entry)
            arrived.notify_all()
            if action.startswith("gather "):
                want = int(action.split()[1])
                arrived.wait_for(lambda: sum(1 for e in status_log if e["path"] == path
                                             and e["action"] == action) >= want, 120)
            known = answers.get((path, key))
            hung = threading.Event()
            status_hangs.append(hung)
        if action == "hang":
            hung.wait(120)
            self.close_connection = True
            return None
        if action == "fail":
            return self.send(500, "application/json", b'{"error": "status unavailable"}')
        if action == "garbage":
            return self.send(200, "text/html", b"<html>maintenance</html>")
        if action == "refused":
            return self.send(410, "application/json", b'{"error": "bounced"}')
        if known is None:
            return self.send(404, "application/json", b'{"error": "no such message"}')
        doc = {"state": "sent", "message": json.loads(known[2]) if known[1] == "application/json" else known[2].decode()}
        return self.send(200, "application/json", json.dumps(doc).encode())

    def handle_any(self):
        data = self.body()
        path = self.path.split("?")[0]
        if path.startswith("/_"):
            return self.control(data)
        if self.command == "GET" and "/status/" in path:
            base, _, key = path.partition("/status/")
            return self.status(base, unquote(key))
        key = self.headers.get("Idempotency-Key")
        with lock:
            log.append({"method": self.command, "path": self.path, "key": key,
                        "peer": self.client_address[1],
                        "headers": dict(self.headers), "body": data.decode("utf-8", "replace")})
            known = honour.get(path, True) and (path, key) in answers
            script = scripts.setdefault(path, deque())
            action = script.popleft() if script and not known else "ok"
        if known:
            return self.send(*answers[(path, key)])
        doc = json.dumps({"id": "msg_%d" % len(log), "path": path}).encode()
        if action == "ok":
            self.act(path, key, 200, "application/json", doc)
            return self.send(200, "application/json", doc)
        if action == "text":
            self.act(path, key, 202, "text/plain", b"queued")
            return self.send(202, "text/plain", b"queued")
        if action == "refuse":
            return self.send(422, "application/json", REFUSAL)
        if action == "binary":
            return self.send(400, "application/octet-stream", BINARY)
        if action == "fail":
            return self.send(503, "application/json", b'{"error": "try later"}')
        if action == "hang":
            released.wait(120)
            self.close_connection = True
            return None
        if action == "drop":
            self.act(path, key, 200, "application/json", doc)
            self.close_connection = True
            return None
        if action == "hold":
            self.act(path, key, 200, "application/json", doc)
            released.wait(120)
            try:
                self.send(200, "application/json", doc)
            except OSError:
                pass
            return None
        return self.send(500, "text/plain", b"unknown action")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if len(sys.argv) > 3:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[2], sys.argv[3])
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    server.serve_forever()


if __name__ == "__main__":
    main()
