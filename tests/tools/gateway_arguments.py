"""The same argument bytes over the gateway's three transports: the HTTP API, MCP over
Streamable HTTP (/mcp) and MCP over stdio (idem-gateway --stdio). Each gives the same
verdict for each number, and the same bytes under one operation ID replay whatever the
transport. Prints one "ok NAME" or "FAIL NAME: why" line per check.

gateway_arguments.py GATEWAY CONFIG PORT TOKEN"""
import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid

gateway, config, port, token = sys.argv[1:5]
base = f"http://127.0.0.1:{port}"
failed = 0


def check(name, cond, why=""):
    global failed
    if cond:
        print(f"ok {name}")
    else:
        failed += 1
        print(f"FAIL {name}: {why}")


def post(path, body, headers):
    req = urllib.request.Request(base + path, data=body, method="POST")
    req.add_header("Authorization", "Bearer " + token)
    for k, v in headers.items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


def http_call(tool, args, key):
    """The HTTP API: (verdict, pointer, answer)."""
    status, body, headers = post(f"/v1/tools/{tool}", args,
                                 {"Content-Type": "application/json", "Idempotency-Key": key})
    doc = json.loads(body)
    if status == 201:
        return headers.get("Idem-Status"), None, doc
    if status == 400 and doc.get("type") == "urn:idem:problem:invalid-arguments":
        return "invalid", doc.get("pointer"), doc
    return f"http {status} {doc.get('type')}", None, doc


def message(n, tool, args, key, extra_meta=None):
    """A tools/call message with the argument bytes @args spliced in as they are."""
    meta = {"idem/operation_id": key} if key is not None else {}
    meta.update(extra_meta or {})
    head = json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                       "params": {"name": tool, "_meta": meta, "arguments": "@@"}})
    return head.replace('"@@"', args.decode())


def mcp_verdict(reply):
    if "error" in reply:
        return f"rpc error {reply['error']['code']}", None, reply
    sc = reply["result"]["structuredContent"]
    return sc["status"], sc.get("pointer"), reply


stdio = subprocess.Popen([gateway, "--stdio", "--config", config], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
# Whatever happens, the test ends: a reply that never comes stops it here.
signal.alarm(300)
next_id = [0]


def stdio_call(tool, args, key):
    next_id[0] += 1
    stdio.stdin.write(message(next_id[0], tool, args, key) + "\n")
    stdio.stdin.flush()
    while True:
        line = stdio.stdout.readline()
        if not line:
            return "stdio closed", None, None
        reply = json.loads(line)
        if reply.get("id") in (next_id[0], None):  # None: a message the gateway cannot read
            return mcp_verdict(reply)


def mcp_http_call(tool, args, key):
    next_id[0] += 1
    status, body, _ = post("/mcp", message(next_id[0], tool, args, key).encode(),
                        {"Content-Type": "application/json",
                         "Accept": "application/json, text/event-stream"})
    return mcp_verdict(json.loads(body))


transports = {"http": http_call, "mcp_http": mcp_http_call, "mcp_stdio": stdio_call}

# 1. Each number's verdict, the same on every transport: I-JSON (RFC 7493) refuses what a
# double would round, from the bytes the client sent.
numbers = {
    "3.141592653589793238462643383279": ("invalid", "/n"),
    "9007199254740993.0": ("invalid", "/n"),
    "1e-400": ("invalid", "/n"),
    "1e400": ("invalid", "/n"),
    "9007199254740993": ("invalid", "/n"),
    "1e308": ("created", None),
    "-0": ("created", None),
    "0.1": ("created", None),
    "0.10000000000000001": ("created", None),
}
for i, (number, want) in enumerate(numbers.items()):
    for t, call in transports.items():
        args = b'{"n": ' + number.encode() + b'}'
        got, pointer, doc = call("record", args, str(uuid.uuid4()))
        check(f"{t}_number_{i}", (got, pointer) == want,
              f"{number}: {got} {pointer}, expected {want}: {doc}")

# A refused number deep inside is named by its place.
for t, call in transports.items():
    got, pointer, doc = call("record", b'{"n": 1, "more": {"list": [0.5, 1e-400]}}',
                             str(uuid.uuid4()))
    check(f"{t}_nested_number_pointer", (got, pointer) == ("invalid", "/more/list/1"),
          f"{got} {pointer}: {doc}")
    # A string holding \u0000 that the statement binds: the pointer, not only the words.
    got, pointer, doc = call("record", b'{"n": 1, "label": "a\\u0000b"}', str(uuid.uuid4()))
    check(f"{t}_nul_pointer", (got, pointer) == ("invalid", "/label"), f"{got} {pointer}: {doc}")
    # A member sent twice.
    got, pointer, doc = call("record", b'{"n": 1, "more": {"a": 1, "a": 2}}', str(uuid.uuid4()))
    check(f"{t}_duplicate_pointer", (got, pointer) == ("invalid", "/more"),
          f"{got} {pointer}: {doc}")

# 2. The same bytes under one operation ID, whatever the transport: one fingerprint.
key = str(uuid.uuid4())
args = b'{"n": 0.1, "label": "same \\u00e9"}'
first = http_call("record", args, key)
check("same_bytes_first_created", first[0] == "created", str(first))
for t in ("mcp_http", "mcp_stdio"):
    got = transports[t]("record", args, key)
    check(f"same_bytes_{t}_replays", got[0] == "replayed", str(got))
# The other way round: first over MCP, then over HTTP.
key = str(uuid.uuid4())
got = stdio_call("record", b'{"label": "x", "n": 2.5e-3}', key)
check("mcp_first_created", got[0] == "created", str(got))
status, body, _ = post("/v1/tools/record", b'{"n":0.0025,"label":"x"}',
                    {"Content-Type": "application/json", "Idempotency-Key": key})
check("http_after_mcp_replays", status == 201 and json.loads(body) == got[2]["result"]
      ["structuredContent"]["receipt"], f"{status} {body}")

# 3. RFC 8785: 1.0 and 1 are one number, so one intent; 1.5 is another.
key = str(uuid.uuid4())
check("one_created", http_call("record", b'{"n": 1}', key)[0] == "created")
for t in ("mcp_http", "mcp_stdio"):
    got = transports[t]("record", b'{"n": 1.0}', key)
    check(f"one_point_zero_{t}_replays", got[0] == "replayed", str(got))
    got = transports[t]("record", b'{"n": 1.5}', key)
    check(f"one_point_five_{t}_conflicts", got[0] == "conflict", str(got))

# 4. The operation ID as an argument: taken out of the bytes, the rest fingerprinted as sent.
key = str(uuid.uuid4())
got = mcp_http_call("record_with_id", ('{"label": "y", "operation_id": "%s", "n": 0.1}'
                                       % key).encode(), None)
check("argument_id_created", got[0] == "created", str(got))
got = http_call("record_with_id", b'{"label": "y", "n": 0.1}', key)
check("argument_id_http_replays", got[0] == "replayed", str(got))
got = stdio_call("record_with_id", ('{"operation_id": "%s", "n": 1e-400}' % str(uuid.uuid4()))
                 .encode(), None)
check("argument_id_number_refused", got[:2] == ("invalid", "/n"), str(got))
got = stdio_call("record_with_id", b'{"operation_id": 5, "n": 1}', None)
check("argument_id_not_string", got[0] == "invalid" and
      "must be a string" in got[2]["result"]["content"][0]["text"], str(got))
got = stdio_call("record_with_id", ('{"operation_id": "%s", "operation_id": "%s", "n": 1}'
                                    % (key, key)).encode(), None)
check("argument_id_twice", got[0] == "invalid", str(got))

# 5. Not JSON, or arguments not an object, as before: JSON-RPC errors.
for t in ("mcp_http", "mcp_stdio"):
    got = transports[t]("record", b'[1, 2]', str(uuid.uuid4()))
    check(f"{t}_arguments_array", got[0] == "rpc error -32602", str(got))
    got = transports[t]("record", b'{"n": 1, }', str(uuid.uuid4()))
    check(f"{t}_arguments_not_json", got[0] == "rpc error -32700", str(got))

stdio.stdin.close()
check("stdio_exits_0", stdio.wait(timeout=120) == 0)
sys.exit(1 if failed else 0)
