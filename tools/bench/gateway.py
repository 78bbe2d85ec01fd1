#!/usr/bin/env python3
"""The gateway bench: idem-gateway under wrk against the same declared effect called in
process through the library (idem-bench --mode gateway), in one run on one server.

    gateway.py BUILD-DIR [--connections 1,16,64] [--duration SECONDS] [--pool N]
                         [--soak SECONDS]

Run under tools/with-postgres (the PG* variables name the server); tools/run bench
--gateway and --gateway-soak run it at the server's default durability. It creates a
database (idem_gwbench_PID), migrates it, and for each connection count runs the
in-process side (one thread per connection, pools of min(connections, --pool)), then wrk
against the gateway (pool_size --pool) with a fresh Idempotency-Key per request (new keys)
and with the keys gateway-replay-* that the in-process side created (replays). It prints
throughput and p50/p99 beside the in-process side's, their ratios, the load average, and
checks that the rows the gateway created equal its non-replayed 201 answers.

--soak SECONDS instead runs wrk at 64 connections on new keys for that long, sampling the
gateway's resident set size (VmRSS of /proc/PID/status) every 5 s.

Exit status: 0; 1 a step failed; 2 a check failed (rows against 201s, error answers).
"""
import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# In step with tools/bench/bench.h (BENCH_GATEWAY_*) and gateway.c: the in-process side
# calls the same tool, tenant, statement and arguments.
TENANT = "gateway-bench"
TOOL = "create_bench_task"
STATEMENT = ("INSERT INTO public.bench_gateway_tasks (tenant, subject, operation_id)"
             " VALUES ($1, $2, $3)"
             " RETURNING json_build_object('status', 'created', 'task_id', task_id)")
REPLAY_KEYS = 1000
TARGET_THROUGHPUT, TARGET_P99, TARGET_AT = 0.7, 2.0, 16
SOAK_CONNECTIONS, SOAK_SAMPLE_S = 64, 5


def say(msg):
    print("gateway bench: " + msg, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def psql(db, sql):
    out = subprocess.run(["psql", "-X", "-Atq", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def rows(db):
    return int(psql(db, "SELECT count(*) FROM public.bench_gateway_tasks"
                        " WHERE tenant = '%s'" % TENANT))


def settled_rows(db):
    """The row count once the calls still under way in the gateway have committed."""
    last = rows(db)
    while True:
        time.sleep(0.5)
        now = rows(db)
        if now == last:
            return now
        last = now


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def gateway_config(db, token, pool):
    return {
        "http": {"address": "127.0.0.1", "port": 0},
        "database": {"dsn": "dbname=" + db, "pool_size": pool},
        "tenants": {TENANT: {"tokens": [hashlib.sha256(token.encode()).hexdigest()]}},
        "tools": {TOOL: {
            "payload_version": 1,
            "arguments": {"type": "object",
                          "properties": {"subject": {"type": "string", "minLength": 1,
                                                     "maxLength": 200}},
                          "required": ["subject"], "additionalProperties": False},
            "sql": {"statement": STATEMENT, "params": ["$tenant", "/subject", "$operation_id"]},
        }},
    }


class Gateway:
    def __init__(self, exe, config, log):
        self.log = log
        self.proc = subprocess.Popen([exe, "--config", config], stdout=subprocess.DEVNULL,
                                     stderr=open(log, "w"))
        self.port = None
        for _ in range(600):
            with open(log) as f:
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", f.read())
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        sys.exit("gateway bench: the gateway did not start:\n" + open(log).read())

    def url(self):
        return "http://127.0.0.1:%d/v1/tools/%s" % (self.port, TOOL)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wrk(url, mode, token, connections, seconds, nonce):
    threads = min(connections, os.cpu_count() or 1)
    cmd = ["wrk", "-t", str(threads), "-c", str(connections), "-d", "%gs" % seconds,
           "--timeout", "30s", "-s", os.path.join(HERE, "gateway.lua"), url, "--",
           mode, token, nonce, str(REPLAY_KEYS)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"^gateway-bench-result (.*)$", out, re.M)
    if m is None:
        sys.exit("gateway bench: wrk said nothing the bench reads:\n" + out)
    r = json.loads(m.group(1))
    r["ops_per_s"] = r["answered"] / (r["duration_us"] / 1e6)
    return r


def in_process(build, db, connections, seconds, pool):
    out = subprocess.run([os.path.join(build, "tools", "idem-bench"), "--existing", "--dsn",
                          "dbname=" + db, "--mode", "gateway", "--threads", str(connections),
                          "--duration", "%g" % seconds, "--pool", str(pool), "--json"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    sides = {s["side"]: s for s in json.loads(out)["results"][0]["sides"]}
    return sides["in-process new keys"], sides["in-process replays"]


class Run:
    """One gateway measurement with its check: rows created against non-replayed 201s."""

    def __init__(self, gw, db, token, what, connections, seconds):
        before = rows(db)
        self.load = loadavg()
        self.r = wrk(gw.url(), what, token, connections, seconds, secrets.token_hex(4))
        self.rows = settled_rows(db) - before
        r = self.r
        self.unanswered = r["sent"] - r["answered"]
        # A call under way when wrk stops is finished by the gateway, its answer unread.
        self.ok = (r["created"] <= self.rows <= r["created"] + self.unanswered and
                   r["other"] == 0 and r["socket_errors"] == 0 and
                   (what == "new" or r["created"] == 0))

    def check_line(self, label):
        r = self.r
        line = ("%s: rows created %d, non-replayed 201s %d, replayed 201s %d, other answers %d,"
                " socket errors %d" % (label, self.rows, r["created"], r["replayed"], r["other"],
                                       r["socket_errors"]))
        if self.rows != r["created"]:
            line += (" (%d calls unanswered when wrk stopped, finished by the gateway)"
                     % self.unanswered)
        if r["other"]:
            line += "; first other answer: " + r["first_other"]
        return line + (": ok" if self.ok else ": FAILED")


def ratio(a, b):
    return a / b if b else float("nan")


def measure(args, gw_start, db, token, pool):
    table, checks, gw = [], [], None
    for c in args.connections:
        say("%d connection%s: in process" % (c, "" if c == 1 else "s"))
        load = loadavg()
        new_in, replay_in = in_process(args.build, db, c, args.duration, pool)
        if gw is None:
            gw = gw_start()
        say("%d connection%s: the gateway" % (c, "" if c == 1 else "s"))
        wrk(gw.url(), "new", token, c, 1, "warm" + secrets.token_hex(4))  # not measured
        new_gw = Run(gw, db, token, "new", c, args.duration)
        replay_gw = Run(gw, db, token, "replay", c, args.duration)
        for what, g, i in (("new keys", new_gw, new_in), ("replays", replay_gw, replay_in)):
            table.append((c, what, g, i, load + " / " + g.load))
            checks.append(g.check_line("%d connections, %s" % (c, what)))
    return table, checks, gw


def print_table(table, pool, args):
    print("\nidem-gateway (wrk, keep-alive, a fresh key per request or replays of %d keys)"
          " against the same declared effect in process (idem-bench --mode gateway, attempt 0"
          " as the gateway marks requests, one thread per connection); pools of min(connections,"
          " %d); %g s per side" % (REPLAY_KEYS, pool, args.duration))
    print("%-5s %-9s %10s %10s %6s %17s %17s %8s  %s" % (
        "conns", "requests", "gw ops/s", "lib ops/s", "ratio", "gw p50/p99 ms",
        "lib p50/p99 ms", "p99 gw/lib", "load average (lib / gw)"))
    for c, what, g, i, load in table:
        r = g.r
        print("%-5d %-9s %10.0f %10.0f %6.2f %8.2f /%7.2f %8.2f /%7.2f %8.2f    %s" % (
            c, what, r["ops_per_s"], i["ops_per_s"], ratio(r["ops_per_s"], i["ops_per_s"]),
            r["p50_us"] / 1e3, r["p99_us"] / 1e3, i["p50_ms"], i["p99_ms"],
            ratio(r["p99_us"] / 1e3, i["p99_ms"]), load))


def print_targets(table):
    for c, what, g, i, _ in table:
        if c != TARGET_AT:
            continue
        t = ratio(g.r["ops_per_s"], i["ops_per_s"])
        p = ratio(g.r["p99_us"] / 1e3, i["p99_ms"])
        print("target at %d connections, %s: throughput %.2f x in-process (>= %.1f: %s),"
              " p99 %.2f x (<= %.0f: %s)" % (c, what, t, TARGET_THROUGHPUT,
                                             "met" if t >= TARGET_THROUGHPUT else "not met", p,
                                             TARGET_P99, "met" if p <= TARGET_P99 else "not met"))


def soak(args, gw_start, db, token, pool):
    say("soak: setting up (the in-process side, 1 s)")
    in_process(args.build, db, 1, 1, pool)
    gw = gw_start()
    say("soak: %d connections, new keys, %d s" % (SOAK_CONNECTIONS, args.soak))
    before, samples = rows(db), []
    proc = subprocess.Popen(
        ["wrk", "-t", str(min(SOAK_CONNECTIONS, os.cpu_count() or 1)), "-c",
         str(SOAK_CONNECTIONS), "-d", "%ds" % args.soak, "--timeout", "30s", "-s",
         os.path.join(HERE, "gateway.lua"), gw.url(), "--", "new", token, secrets.token_hex(4),
         str(REPLAY_KEYS)], stdout=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while proc.poll() is None:
        samples.append((time.monotonic() - t0, rss_kb(gw.proc.pid), loadavg()))
        time.sleep(SOAK_SAMPLE_S)
    samples.append((time.monotonic() - t0, rss_kb(gw.proc.pid), loadavg()))
    m = re.search(r"^gateway-bench-result (.*)$", proc.stdout.read(), re.M)
    r = json.loads(m.group(1))
    created = settled_rows(db) - before
    print("\nsoak: %d connections, new keys, %d s: %.0f ops/s, p50 %.2f ms, p99 %.2f ms" % (
        SOAK_CONNECTIONS, args.soak, r["answered"] / (r["duration_us"] / 1e6),
        r["p50_us"] / 1e3, r["p99_us"] / 1e3))
    print("gateway RSS (VmRSS), every %d s: %s kB" % (
        SOAK_SAMPLE_S, " ".join(str(s[1]) for s in samples)))
    print("RSS at start %d kB, at end %d kB (%+d kB); load average at start %s, at end %s" % (
        samples[0][1], samples[-1][1], samples[-1][1] - samples[0][1], samples[0][2],
        samples[-1][2]))
    unanswered = r["sent"] - r["answered"]
    ok = r["created"] <= created <= r["created"] + unanswered and r["other"] == 0
    print("rows created %d, non-replayed 201s %d, other answers %d, unanswered at the end %d: %s"
          % (created, r["created"], r["other"], unanswered, "ok" if ok else "FAILED"))
    return gw, ok


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("build")
    p.add_argument("--connections", default="1,16,64")
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--pool", type=int, default=2 * (os.cpu_count() or 1))
    p.add_argument("--soak", type=int, default=0)
    args = p.parse_args()
    try:
        args.connections = [int(c) for c in args.connections.split(",")]
    except ValueError:
        p.error("--connections: a comma-separated list of numbers")
    if any(c < 1 or c > 64 for c in args.connections) or args.pool < 1 or args.duration <= 0:
        p.error("--connections 1 to 64 each, --pool at least 1, --duration above 0")
    return args


def main():
    args = parse_args()
    db = "idem_gwbench_%d" % os.getpid()
    token = secrets.token_hex(16)
    tmp = tempfile.mkdtemp(prefix="idem-gwbench.")
    config = os.path.join(tmp, "gateway.json")
    with open(config, "w") as f:
        json.dump(gateway_config(db, token, args.pool), f)
    gws = []

    def gw_start():
        gws.append(Gateway(os.path.join(args.build, "tools", "idem-gateway", "idem-gateway"),
                           config, os.path.join(tmp, "gateway.log")))
        say("gateway pid %d, port %d, RSS %d kB" % (gws[-1].proc.pid, gws[-1].port,
                                                     rss_kb(gws[-1].proc.pid)))
        return gws[-1]

    psql("postgres", "CREATE DATABASE " + db)
    ok = True
    try:
        subprocess.run([os.path.join(args.build, "tools", "idem-migrate"), "up"], check=True,
                       env=dict(os.environ, PGDATABASE=db), stdout=subprocess.DEVNULL)
        durability = ", ".join("%s %s" % (s, psql(db, "SHOW " + s))
                               for s in ("fsync", "synchronous_commit", "full_page_writes"))
        print("PostgreSQL %s (%s); %d CPUs; load average at start %s" % (
            psql(db, "SHOW server_version"), durability, os.cpu_count(), loadavg()))
        if args.soak:
            _, ok = soak(args, gw_start, db, token, args.pool)
        else:
            table, checks, gw = measure(args, gw_start, db, token, args.pool)
            print_table(table, args.pool, args)
            print_targets(table)
            print("gateway RSS at the end: %d kB; load average at the end %s" % (
                rss_kb(gw.proc.pid), loadavg()))
            print("\nchecks: the rows the gateway created against its non-replayed 201s")
            for line in checks:
                print(line)
            ok = all(line.endswith(": ok") for line in checks)
    finally:
        for gw in gws:
            gw.stop()
        psql("postgres", "DROP DATABASE IF EXISTS " + db)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 2


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as e:
        sys.exit("gateway bench: %s failed: exit %d %s" % (e.cmd[0], e.returncode,
                                                           e.stderr or ""))
