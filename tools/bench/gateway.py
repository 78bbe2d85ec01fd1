#!/usr/bin/env python3
"""The gateway bench: idem-gateway under wrk against the same declared effect called in
process through the library (idem-bench --mode gateway), in one run on one server.

    gateway.py BUILD-DIR [--connections 1,16,64] [--duration SECONDS] [--rounds N] [--pool N]
                         [--statement-timeout-ms N] [--warm-up SECONDS] [--soak SECONDS]

Run under tools/with-postgres (the PG* variables name the server); tools/run bench
--gateway and --gateway-soak run it at the server's default durability. It creates a
database (idem_gwbench_PID), migrates it, and for each connection count runs the
in-process side (one thread per connection, pools of min(connections, --pool)), then wrk
against the gateway (pool_size --pool) with a fresh Idempotency-Key per request (new keys)
and with the keys gateway-replay-* that the in-process side created (replays). It prints
throughput and p50/p99 beside the in-process side's, their ratios, the load average, and
checks that the rows the gateway created equal its non-replayed 201 answers. Where
idem-bench-http-floor is built (tools/bench/http_floor.c: the least a libmicrohttpd server
does for the same requests and statements, without idempotency, its database connections
capped at --pool as the gateway's are), it runs the same wrk
rounds against it, checks its answers as the gateway's (a 201 each, replays marked, its
rows against its 201s), and prints each process's own CPU per answered call (user + system
from /proc/PID/stat) side by side: idem-gateway / the minimal server, target at most 1.5
for the median of the per-round ratios (in each round the two servers' runs of a kind one
right after the other, the gateway first in rounds 1, 3, ... and second in rounds 2, 4, ...;
each measured run after --warm-up seconds (default 1; 0: none) of the same requests to the
same server, not measured).
For new keys it also runs the minimal server in its two record modes (the tool's INSERT
and a record of the call in one pipelined SERIALIZABLE transaction, as idem-bench's create
floor: on a lean table, and as a row of idem.operations, the database's work of the
gateway's call without idem) and prints the gateway's CPU per call against each, for
information, and every process's CPU per call as user and system time: on a virtual
machine a process's CPU per call counts the switches to its threads as they wake, whose
cost grows with what the database does per call. --statement-timeout-ms sets the gateway's
database.statement_timeout_ms and the in-process side's pool's alike (default 0: the
server's).

--soak SECONDS instead runs wrk at 64 connections on new keys for that long, sampling the
gateway's resident set size (VmRSS of /proc/PID/status) every 5 s.

Exit status: 0; 1 a step failed; 2 a check failed (rows against 201s, error answers).
"""
import argparse
import hashlib
import json
import os
import re
import resource
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


def gateway_config(db, token, pool, statement_timeout_ms=0):
    return {
        "http": {"address": "127.0.0.1", "port": 0},
        "database": {"dsn": "dbname=" + db, "pool_size": pool,
                     "statement_timeout_ms": statement_timeout_ms},
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
    """A server under wrk: idem-gateway (EXE --config CONFIG), or @cmd (the minimal
    libmicrohttpd server, idem-bench-http-floor), that says on stderr where it listens."""

    def __init__(self, exe, config, log, cmd=None):
        self.log = log
        self.proc = subprocess.Popen(cmd or [exe, "--config", config],
                                     stdout=subprocess.DEVNULL, stderr=open(log, "w"))
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


def cpu_split(pid):
    """User and system CPU seconds of process @pid so far (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_s(pid):
    """User + system CPU seconds of process @pid so far (/proc/PID/stat)."""
    return sum(cpu_split(pid))


SERVER_PID = [0]  # the postmaster's, once known (watch_server())


def watch_server(db):
    """Count the server's CPU from now on: its postmaster's process ID from its data
    directory (the bench runs on the server's machine, as tools/with-postgres does)."""
    try:
        with open(os.path.join(psql(db, "SHOW data_directory"), "postmaster.pid")) as f:
            SERVER_PID[0] = int(f.readline())
    except (OSError, ValueError, subprocess.CalledProcessError):
        SERVER_PID[0] = 0  # not readable here: the server's CPU counts 0, the bound n/a


def ticks(pid, children):
    """User + system CPU ticks of process @pid (with its waited-for children's when
    @children) and its parent's ID; (0, 0) when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0, 0
    return int(v[11]) + int(v[12]) + (int(v[13]) + int(v[14]) if children else 0), int(v[1])


def server_s():
    """The server's CPU seconds so far: the postmaster's, with every backend's, ended or
    running (idem-bench counts it the same way, tools/bench/rounds.c)."""
    pid = SERVER_PID[0]
    if pid <= 0:
        return 0.0
    total = ticks(pid, True)[0]
    for name in os.listdir("/proc"):
        if name.isdigit():
            t, parent = ticks(int(name), False)
            if parent == pid:
                total += t
    return total / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wrk(url, mode, token, connections, seconds, nonce):
    threads = min(connections, os.cpu_count() or 1)
    # wrk takes whole seconds only ("2.5s" is a usage error): a round's share rounded.
    cmd = ["wrk", "-t", str(threads), "-c", str(connections), "-d",
           "%ds" % max(1, round(seconds)),
           "--timeout", "30s", "-s", os.path.join(HERE, "gateway.lua"), url, "--",
           mode, token, nonce, str(REPLAY_KEYS)]
    cpu = children_cpu_s()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("gateway bench: wrk failed: exit %d: %s%s" % (p.returncode, p.stdout, p.stderr))
    out = p.stdout
    m = re.search(r"^gateway-bench-result (.*)$", out, re.M)
    if m is None:
        sys.exit("gateway bench: wrk said nothing the bench reads:\n" + out)
    r = json.loads(m.group(1))
    r["wrk_cpu_s"] = children_cpu_s() - cpu
    return r


def in_process(build, db, connections, seconds, pool, statement_timeout_ms=0):
    out = subprocess.run([os.path.join(build, "tools", "idem-bench"), "--existing", "--dsn",
                          "dbname=" + db, "--mode", "gateway", "--threads", str(connections),
                          "--duration", "%g" % seconds, "--pool", str(pool),
                          "--statement-timeout-ms", str(statement_timeout_ms), "--json"],
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True).stdout
    sides = {s["side"]: s for s in json.loads(out)["results"][0]["sides"]}
    return sides["in-process new keys"], sides["in-process replays"]


class Run:
    """One gateway measurement with its check: rows created against non-replayed 201s."""

    def __init__(self, gw, db, token, what, connections, seconds):
        before, cpu = settled_rows(db), cpu_split(gw.proc.pid)
        self.what = what
        self.load = loadavg()
        server = server_s()
        self.r = wrk(gw.url(), what, token, connections, seconds, secrets.token_hex(4))
        self.server_s = server_s() - server
        after = cpu_split(gw.proc.pid)
        self.gw_user_s, self.gw_sys_s = after[0] - cpu[0], after[1] - cpu[1]
        self.gw_cpu_s = self.gw_user_s + self.gw_sys_s
        self.rows = settled_rows(db) - before
        r = self.r
        # Requests wrk made and had no answer for when it stopped: the gateway finishes a
        # call under way, and nobody reads its answer.
        self.unanswered = r["sent"] - r["answered"]
        self.ok = (r["created"] <= self.rows <= r["created"] + self.unanswered and
                   r["other"] == 0 and r["socket_errors"] == 0 and
                   (what == "new" or r["created"] == 0) and
                   (what == "healthz") == (r["healthy"] > 0))

    def cpu_us(self):
        """CPU per answered request, µs: the gateway's, wrk's and the server's together; for
        GET /healthz, which never reaches the server, the gateway's and wrk's alone."""
        server = 0 if self.what == "healthz" else self.server_s
        return (1e6 * (self.gw_cpu_s + self.r["wrk_cpu_s"] + server) /
                max(self.r["answered"], 1))


def process_split_us(runs):
    """A server process's user and system CPU per answered call over @runs, µs (nan
    without runs)."""
    n = sum(r.r["answered"] for r in runs)
    if not n:
        return float("nan"), float("nan")
    return (1e6 * sum(r.gw_user_s for r in runs) / n, 1e6 * sum(r.gw_sys_s for r in runs) / n)


def process_cpu_us(runs):
    """A server process's own CPU per answered call over @runs, µs (nan without runs)."""
    return sum(process_split_us(runs))


def round_cpu_ratios(runs, floors):
    """Round by round, one process's CPU per answered call over another's, measured one
    right after the other: what the machine did meanwhile weighs on both alike."""
    return [ratio(process_cpu_us([a]), process_cpu_us([b])) for a, b in zip(runs, floors)]


def said_ratio(run, floor):
    """One round's CPU ratio of @run to @floor, with each one's user and system µs a call."""
    return "%.2f (%.1f/%.1f against %.1f/%.1f µs usr/sys)" % (
        round_cpu_ratios([run], [floor])[0], *process_split_us([run]),
        *process_split_us([floor]))


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2 if n else float("nan")


def median_range(xs):
    """The median of @xs and their range as the tables print it, "[min-max]" ("-" for none)."""
    return median(xs), "[%.2f-%.2f]" % (min(xs), max(xs)) if xs else "-"


def ratio(a, b):
    return a / b if b else float("nan")


class Cell:
    """One connection count and kind of request over its rounds: the gateway's runs and the
    in-process side's results, round by round."""

    def __init__(self, connections, what):
        self.connections, self.what = connections, what
        self.gw, self.lib, self.loads, self.http, self.floor = [], [], [], [], []
        self.floor_record, self.floor_idem = [], []

    def add(self, run, lib, load, http, floor, floor_record=None, floor_idem=None):
        self.gw.append(run)
        self.lib.append(lib)
        self.loads.append(load)
        self.http.append(http)
        if floor is not None:
            self.floor.append(floor)
        if floor_record is not None:
            self.floor_record.append(floor_record)
        if floor_idem is not None:
            self.floor_idem.append(floor_idem)

    def process_cpu_us(self):
        """The server process's own CPU per answered call, µs (user + system of
        /proc/PID/stat over the calls answered): idem-gateway's, the minimal server's (nan
        without it), and the load average at their last runs."""
        load = (self.floor or self.gw)[-1].load.split()[0]
        return process_cpu_us(self.gw), process_cpu_us(self.floor), load

    def total_us(self):
        """Medians over the rounds of all the CPU a request costs, µs: through the gateway
        (gateway, wrk, server), in process (client, server), and GET /healthz (gateway and
        wrk: the HTTP exchange alone)."""
        return (median([g.cpu_us() for g in self.gw]),
                median([i["client_cpu_us_per_op"] + i["server_cpu_us_per_op"]
                        for i in self.lib]),
                median([h.cpu_us() for h in self.http]))

    def bound(self):
        """The highest gateway / in-process ratio the gateway could reach on this machine: a
        request through it costs at least its HTTP exchange (GET /healthz's CPU) plus the
        in-process call's (client and server), and the machine has os.cpu_count() CPUs."""
        if SERVER_PID[0] <= 0:
            return float("nan")  # the in-process call's server share is unknown
        _, lib_us, http_us = self.total_us()
        most = (os.cpu_count() or 1) * 1e6 / (lib_us + http_us)
        return min(1.0, ratio(most, self.lib_ops_per_s()))

    def gw_ops_per_s(self):
        return (sum(g.r["answered"] for g in self.gw) /
                (sum(g.r["duration_us"] for g in self.gw) / 1e6))

    def lib_ops_per_s(self):
        return sum(i["ops"] for i in self.lib) / sum(i["seconds"] for i in self.lib)

    def round_ratios(self):
        return [ratio(g.r["answered"] / (g.r["duration_us"] / 1e6), i["ops_per_s"])
                for g, i in zip(self.gw, self.lib)]

    def p(self, which):
        """Medians over the rounds: gateway p50 or p99 (ms), in-process, per-round ratio."""
        gw = [g.r["p%s_us" % which] / 1e3 for g in self.gw]
        lib = [i["p%s_ms" % which] for i in self.lib]
        return median(gw), median(lib), median([ratio(a, b) for a, b in zip(gw, lib)])

    def cpu_us(self):
        n = sum(g.r["answered"] for g in self.gw)
        return (1e6 * sum(g.gw_cpu_s for g in self.gw) / n,
                1e6 * sum(g.r["wrk_cpu_s"] for g in self.gw) / n,
                median([i["client_cpu_us_per_op"] for i in self.lib]))

    def check_line(self):
        created = sum(g.r["created"] for g in self.gw)
        made = sum(g.rows for g in self.gw)
        other = sum(g.r["other"] for g in self.gw)
        line = ("%d connections, %s: rows created %d, non-replayed 201s %d, replayed 201s %d,"
                " other answers %d, socket errors %d" % (
                    self.connections, self.what, made, created,
                    sum(g.r["replayed"] for g in self.gw), other,
                    sum(g.r["socket_errors"] for g in self.gw)))
        if made != created:
            line += (" (%d requests unanswered when wrk stopped, their calls finished by the"
                     " gateway)" % sum(g.unanswered for g in self.gw))
        if other:
            line += "; first other answer: " + next(g.r["first_other"] for g in self.gw
                                                    if g.r["other"])
        if not all(h.ok for h in self.http):
            line += "; GET /healthz: not every answer a 200"
        if self.floor:
            line += ("; the minimal server: rows created %d, non-replayed 201s %d, replayed 201s"
                     " %d, other answers %d" % (
                         sum(f.rows for f in self.floor), sum(f.r["created"] for f in self.floor),
                         sum(f.r["replayed"] for f in self.floor),
                         sum(f.r["other"] for f in self.floor)))
            first = next((f.r["first_other"] for f in self.floor if f.r["other"]), None)
            if first is not None:
                line += "; its first other answer: " + first
        for name, runs in (("record mode", self.floor_record),
                           ("idem-record mode", self.floor_idem)):
            if runs:
                line += ("; in its %s: rows created %d, non-replayed 201s %d, other answers %d"
                         % (name, sum(f.rows for f in runs), sum(f.r["created"] for f in runs),
                            sum(f.r["other"] for f in runs)))
                first = next((f.r["first_other"] for f in runs if f.r["other"]), None)
                if first is not None:
                    line += "; its first other answer: " + first
        runs = self.gw + self.http + self.floor + self.floor_record + self.floor_idem
        return line + (": ok" if all(g.ok for g in runs) else ": FAILED")


def warm_up(gw, token, connections):
    """A round of each kind, not measured: the server's threads and connections made, and
    the replay keys, which the in-process side made, answered once by this server, as the
    retries that replays are would find them (the gateway looks up first a key it has seen,
    tools/idem-gateway/seen.c; one it has not it claims with its effect, the statement then
    rolled back, three round trips)."""
    wrk(gw.url(), "new", token, connections, 1, "warm" + secrets.token_hex(4))
    wrk(gw.url(), "replay", token, connections, 2, "warm")


def measure(args, gw_start, db, token, pool, floor_start, floor_record_start):
    cells, gw, floor = [], None, None
    records = {}  # the minimal server in each record mode, started on first use
    step = args.duration / args.rounds

    def warmed_run(server, what, c):
        # --warm-up seconds of the same requests to the same server first, not measured: its
        # threads, connections and caches as under load, whatever ran before it. Without
        # it a server that had just been idle through the other's run paid for that in its
        # own (the gateway's CPU a new key higher in the rounds it ran second).
        if args.warm_up > 0:
            wrk(server.url(), what, token, c, args.warm_up, "warm" + secrets.token_hex(4))
        return Run(server, db, token, what, c, step)

    def record_run(mode, c, k):
        if mode not in records:
            records[mode] = floor_record_start(mode)
        if k == 0:
            warm_up(records[mode], token, c)
        return warmed_run(records[mode], "new", c)
    for c in args.connections:
        new, replay = Cell(c, "new keys"), Cell(c, "replays")
        cells += [new, replay]
        for k in range(args.rounds):
            say("%d connection%s, round %d of %d" % (c, "" if c == 1 else "s", k + 1,
                                                     args.rounds))
            load = loadavg()
            new_in, replay_in = in_process(args.build, db, c, step, pool,
                                           args.statement_timeout_ms)
            if gw is None:
                gw = gw_start()
            if floor is None and floor_start is not None:
                floor = floor_start()
            if k == 0:  # not measured
                warm_up(gw, token, c)
                if floor is not None:
                    warm_up(floor, token, c)
            http = Run(gw, db, token, "healthz", c, step)
            # Each kind of request on the two servers one right after the other, the
            # gateway first in rounds 1, 3, ... and second in rounds 2, 4, ..., so that
            # neither always runs nearer the in-process side's writes or after the other's.
            gw_first = k % 2 == 0

            def pair(what):
                if floor is None:
                    return warmed_run(gw, what, c), None
                if gw_first:
                    first = warmed_run(gw, what, c)
                    return first, warmed_run(floor, what, c)
                second = warmed_run(floor, what, c)
                return warmed_run(gw, what, c), second
            new_run, floor_new = pair("new")
            replay_run, floor_replay = pair("replay")
            floor_record_new = floor_idem_new = None
            if floor is not None:
                floor_record_new = record_run("record", c, k)
                floor_idem_new = record_run("idem-record", c, k)
                say("  CPU a call, gateway / minimal server (the gateway %s): new keys %s,"
                    " replays %s" % ("first" if gw_first else "second",
                                     said_ratio(new_run, floor_new),
                                     said_ratio(replay_run, floor_replay)))
            new.add(new_run, new_in, load, http, floor_new, floor_record_new, floor_idem_new)
            replay.add(replay_run, replay_in, load, http, floor_replay)
    return cells, gw


def print_table(cells, pool, args):
    print("\nidem-gateway (wrk, keep-alive; a fresh key per request, or replays of %d keys)"
          " against the same declared effect in process (idem-bench --mode gateway: marked as"
          " the gateway marks requests, attempt 1 for a new key and 2 for a replay, one thread"
          " per connection); pools of"
          " min(connections, %d), statement_timeout_ms %d; %d rounds of %g s per side, the"
          " sides in turn. ops/s over"
          " all rounds; ratio gateway / in-process of all rounds, then the median of the"
          " per-round ratios [min-max]; p50 and p99 medians of the rounds; CPU per request:"
          " the gateway's, wrk's, and the in-process client's; all the CPU a request costs:"
          " through the gateway (gateway + wrk + PostgreSQL), in process (client +"
          " PostgreSQL), and GET /healthz under wrk at the same connections (gateway + wrk:"
          " the HTTP exchange alone, %.0f ops/s); bound: the highest ratio the gateway could"
          " reach here if a call cost it nothing beyond that exchange and the in-process"
          " call: %d CPUs over the sum of their CPU per request, against the in-process"
          " throughput"
          % (REPLAY_KEYS, pool, args.statement_timeout_ms, args.rounds,
             args.duration / args.rounds,
             median([h.r["answered"] / (h.r["duration_us"] / 1e6) for c in cells
                     for h in c.http]), os.cpu_count() or 1))
    print("%-5s %-8s %8s %8s %22s %15s %15s %10s %16s %18s %5s  %s" % (
        "conns", "requests", "gw ops/s", "lib/s", "ratio [rounds]", "gw p50/p99 ms",
        "lib p50/p99 ms", "p99 gw/lib", "CPU us gw/wrk/lib", "all CPU us gw/lib/http",
        "bound", "load average"))
    for c in cells:
        rr = c.round_ratios()
        g50, l50, _ = c.p("50")
        g99, l99, r99 = c.p("99")
        cg, cw, cl = c.cpu_us()
        mg, ml, mh = c.total_us()
        print("%-5d %-8s %8.0f %8.0f %5.2f %4.2f [%4.2f-%4.2f] %6.2f /%7.2f %6.2f /%7.2f %10.2f"
              " %5.0f/%4.0f/%4.0f %6.0f/%5.0f/%5.0f %5.2f  %s .. %s" % (
                  c.connections, c.what, c.gw_ops_per_s(), c.lib_ops_per_s(),
                  ratio(c.gw_ops_per_s(), c.lib_ops_per_s()), median(rr), min(rr), max(rr),
                  g50, g99, l50, l99, r99, cg, cw, cl, mg, ml, mh, c.bound(),
                  c.loads[0].split()[0], c.gw[-1].load.split()[0]))


CPU_TARGET = 1.5


def print_process_cpu(cells, pool, warm_up):
    """idem-gateway's CPU per call beside the minimal libmicrohttpd server's, the same
    requests under wrk, each process alone (not wrk, not PostgreSQL)."""
    if not any(c.floor for c in cells):
        print("\nthe minimal libmicrohttpd server (idem-bench-http-floor) is not built: no"
              " CPU per call beside it")
        return
    print("\nCPU per answered call of the server process alone (user + system from"
          " /proc/PID/stat over the calls it answered), µs: idem-gateway against"
          " idem-bench-http-floor (libmicrohttpd, one thread per connection, at most %d database"
          " connections as the gateway, the same requests:"
          " the tool's INSERT for a new key, the receipt by primary key for a replay; no"
          " idempotency), target gateway / floor <= %.1f" % (pool, CPU_TARGET))
    print("(µs over all rounds; the ratio is the median of the per-round ratios [min-max], each"
          " round's gateway run beside the minimal server's run next to it, the gateway first"
          " in rounds 1, 3, ... and second in rounds 2, 4, ..., %s, and the"
          " target is checked on it)" % (
              "each run after %d s of the same requests, not measured" % warm_up if warm_up
              else "no run after a warm-up (--warm-up 0)"))
    print("cpu %-5s %-8s %10s %10s %7s %-13s %-7s %s" % ("conns", "requests", "gateway", "floor",
                                                         "ratio", "[rounds]", "target",
                                                         "load average"))
    for c in cells:
        gw, fl, load = c.process_cpu_us()
        r, spread = median_range(round_cpu_ratios(c.gw, c.floor))
        print("cpu %-5d %-8s %10.1f %10.1f %7.2f %-13s %-7s %s" % (
            c.connections, c.what, gw, fl, r, spread, "met" if r <= CPU_TARGET else "MISSED",
            load))
    print("\nThe same for new keys beside idem-bench-http-floor in its record modes (for"
          " information, no target): the tool's INSERT and a record of the call in one"
          " pipelined SERIALIZABLE transaction, as idem-bench's create floor: floor+rec on a"
          " lean table of its own, floor+idem as a row of idem.operations (idem-bench's"
          " \"floor, idem's record\": the database's work of the gateway's call, without idem)."
          " On a virtual machine a process's CPU per call also counts the switches to its"
          " threads as they wake, whose cost grows with the database's work per call; idem /"
          " floor, floor+idem's CPU over the minimal server's with the INSERT alone, in each"
          " round, is that share: the same server's code, idem's database work added")
    print("cpu-rec %-5s %-8s %10s %10s %7s %-13s %10s %7s %-13s %10s %-13s %s" % (
        "conns", "requests", "gateway", "floor+rec", "ratio", "[rounds]", "floor+idem", "ratio",
        "[rounds]", "idem/floor", "[rounds]", "load average"))
    for c in cells:
        if c.floor_record:
            rec, idem, share = (median_range(round_cpu_ratios(over, runs))
                                for runs, over in ((c.floor_record, c.gw), (c.floor_idem, c.gw),
                                                   (c.floor, c.floor_idem)))
            print("cpu-rec %-5d %-8s %10.1f %10.1f %7.2f %-13s %10.1f %7.2f %-13s %10.2f %-13s"
                  " %s" % (c.connections, c.what, process_cpu_us(c.gw),
                           process_cpu_us(c.floor_record), *rec, process_cpu_us(c.floor_idem),
                           *idem, *share, c.floor_record[-1].load.split()[0]))
    print("\nThe same CPU per call in its two parts, µs over all rounds (for information): user,"
          " the process's own work; system, the kernel's on its behalf (its system calls, and"
          " on a virtual machine above all the switches to its threads as they wake)")
    print("cpu-part %-5s %-8s %15s %15s %15s %15s %12s" % (
        "conns", "requests", "gateway usr/sys", "floor usr/sys", "f+rec usr/sys",
        "f+idem usr/sys", "usr gw/floor"))
    for c in cells:
        parts = [process_split_us(runs)
                 for runs in (c.gw, c.floor, c.floor_record, c.floor_idem)]
        print("cpu-part %-5d %-8s %15s %15s %15s %15s %12.2f" % (
            c.connections, c.what,
            *["-" if u != u else "%.1f / %.1f" % (u, k) for u, k in parts],
            ratio(parts[0][0], parts[1][0])))


def print_targets(cells):
    for c in cells:
        if c.connections != TARGET_AT:
            continue
        t = ratio(c.gw_ops_per_s(), c.lib_ops_per_s())
        p = c.p("99")[2]
        print("target at %d connections, %s: throughput %.2f x in-process (>= %.1f: %s; at"
              " most %.2f x here, bound), p99 %.2f x (<= %.0f: %s)" % (
                  c.connections, c.what, t, TARGET_THROUGHPUT,
                  "met" if t >= TARGET_THROUGHPUT else "not met", c.bound(), p, TARGET_P99,
                  "met" if p <= TARGET_P99 else "not met"))


def soak(args, gw_start, db, token, pool):
    say("soak: setting up (the in-process side, 1 s)")
    in_process(args.build, db, 1, 1, pool, args.statement_timeout_ms)
    gw = gw_start()
    say("soak: %d connections, new keys, %d s" % (SOAK_CONNECTIONS, args.soak))
    before, samples, idle = rows(db), [], rss_kb(gw.proc.pid)
    proc = subprocess.Popen(
        ["wrk", "-t", str(min(SOAK_CONNECTIONS, os.cpu_count() or 1)), "-c",
         str(SOAK_CONNECTIONS), "-d", "%ds" % args.soak, "--timeout", "30s", "-s",
         os.path.join(HERE, "gateway.lua"), gw.url(), "--", "new", token, secrets.token_hex(4),
         str(REPLAY_KEYS)], stdout=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while proc.poll() is None:
        samples.append((time.monotonic() - t0, rss_kb(gw.proc.pid), loadavg()))
        time.sleep(SOAK_SAMPLE_S)
    after = rss_kb(gw.proc.pid)
    m = re.search(r"^gateway-bench-result (.*)$", proc.stdout.read(), re.M)
    r = json.loads(m.group(1))
    created = settled_rows(db) - before
    print("\nsoak: %d connections, new keys, %d s: %.0f ops/s, p50 %.2f ms, p99 %.2f ms" % (
        SOAK_CONNECTIONS, args.soak, r["answered"] / (r["duration_us"] / 1e6),
        r["p50_us"] / 1e3, r["p99_us"] / 1e3))
    print("gateway RSS (VmRSS), every %d s under the load: %s kB" % (
        SOAK_SAMPLE_S, " ".join(str(s[1]) for s in samples)))
    settled = next((s for s in samples if s[0] >= 2 * SOAK_SAMPLE_S), samples[-1])
    print("RSS idle before the load %d kB; at the start of the load %d kB, after %.0f s (its"
          " connections' threads and the pool open) %d kB, at the end of the load %d kB (%+d kB"
          " since %.0f s), at most %d kB; after the load (its connections closed) %d kB; load"
          " average at the start %s, at the end %s" % (
              idle, samples[0][1], settled[0], settled[1], samples[-1][1],
              samples[-1][1] - settled[1], settled[0], max(s[1] for s in samples), after,
              samples[0][2], samples[-1][2]))
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
    p.add_argument("--statement-timeout-ms", type=int, default=0)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--soak", type=int, default=0)
    p.add_argument("--warm-up", type=int, default=1)
    args = p.parse_args()
    try:
        args.connections = [int(c) for c in args.connections.split(",")]
    except ValueError:
        p.error("--connections: a comma-separated list of numbers")
    if (any(c < 1 or c > 64 for c in args.connections) or args.pool < 1 or args.rounds < 1 or
            args.duration / max(args.rounds, 1) < 1 or args.warm_up < 0):
        p.error("--connections 1 to 64 each, --pool and --rounds at least 1, --duration at"
                " least 1 s per round, --warm-up 0 or more")
    return args


def main():
    args = parse_args()
    db = "idem_gwbench_%d" % os.getpid()
    token = secrets.token_hex(16)
    tmp = tempfile.mkdtemp(prefix="idem-gwbench.")
    config = os.path.join(tmp, "gateway.json")
    with open(config, "w") as f:
        json.dump(gateway_config(db, token, args.pool, args.statement_timeout_ms), f)
    gws = []

    def gw_start():
        gws.append(Gateway(os.path.join(args.build, "tools", "idem-gateway", "idem-gateway"),
                           config, os.path.join(tmp, "gateway.log")))
        say("gateway pid %d, port %d, RSS %d kB" % (gws[-1].proc.pid, gws[-1].port,
                                                     rss_kb(gws[-1].proc.pid)))
        return gws[-1]

    floor_exe = os.path.join(args.build, "tools", "idem-bench-http-floor")

    def floor_start(*mode):
        gws.append(Gateway(None, None, os.path.join(tmp, "floor%s.log" % "".join(mode)),
                           [floor_exe, db, hashlib.sha256(token.encode()).hexdigest(),
                            str(args.pool)] + list(mode)))
        say("minimal libmicrohttpd server%s pid %d, port %d" % (
            "".join(" (%s)" % m for m in mode), gws[-1].proc.pid, gws[-1].port))
        return gws[-1]

    psql("postgres", "CREATE DATABASE " + db)
    watch_server(db)
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
            cells, gw = measure(args, gw_start, db, token, args.pool,
                                floor_start if os.path.exists(floor_exe) else None,
                                lambda mode="record": floor_start(mode))
            print_table(cells, args.pool, args)
            print_targets(cells)
            print_process_cpu(cells, args.pool, args.warm_up)
            print("gateway RSS at the end: %d kB; load average at the end %s" % (
                rss_kb(gw.proc.pid), loadavg()))
            print("\nchecks: the rows the gateway created against its non-replayed 201s")
            checks = [c.check_line() for c in cells]
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
