#!/usr/bin/env bash
# test-idem-bench.sh IDEM-BENCH RUNNER-LIBRARY: the runner library (bench/*.c) needs no
# symbol from idem-bench.c, which is only the command line, and keeps no settings in
# globals; a short run against the server of tools/with-postgres works and reports the
# settings it was given.
set -uo pipefail
bench=$1 runner=$2
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# bench_* symbols the library uses but does not define: they would come from idem-bench.c.
defined=$(nm --defined-only "$runner" | awk '$2 ~ /^[A-Z]$/ && $3 ~ /^bench_/ {print $3}' | sort -u)
used=$(nm --undefined-only "$runner" | awk '$1 == "U" && $2 ~ /^bench_/ {print $2}' | sort -u)
missing=$(comm -13 <(echo "$defined") <(echo "$used"))
[ -z "$missing" ] || fail "the runner library needs from the command line: $(echo $missing)"
grep -qx bench_main <<<"$defined" || fail "the runner library does not define bench_main"
globals=$(nm --defined-only "$runner" | awk '$2 ~ /^[BDC]$/ && $3 ~ /^bench_/ {print $3}')
[ -z "$globals" ] || fail "settings kept in globals: $(echo $globals)"

"$bench" --pool 0 >/dev/null 2>&1
[ $? = 64 ] || fail "--pool 0: not a usage error"
# A list with an empty item is a typo, not a shorter list.
for list in 1,,2 ,1 1, ''; do
    err=$("$bench" --threads "$list" 2>&1 >/dev/null)
    [ $? = 64 ] || fail "--threads '$list': not a usage error"
    [ -z "$list" ] || grep -q "bad value for --threads: $list (an empty item)" <<<"$err" ||
        fail "--threads '$list': the message does not say why: $err"
done
"$bench" --mode create,,replay >/dev/null 2>&1
[ $? = 64 ] || fail "--mode create,,replay: not a usage error"

if ! psql -Atqc 'SELECT 1' dbname=postgres >/dev/null 2>&1; then
    if [ -n "${IDEM_REQUIRE_PG:-}" ]; then
        echo "PostgreSQL required but unreachable" >&2
        exit 1
    fi
    echo "SKIPPED: no PostgreSQL server; run under tools/with-postgres" >&2
    exit 77
fi

out=$("$bench" --durability as-is --mode contention --duration 1 --round 0.1 --pool 3 --json 2>/dev/null)
status=$?
[ "$status" = 0 ] || fail "a short contention run: exit $status"
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["settings"]["pool_cap"] == 3, d["settings"]
(m,) = d["results"]
assert m["mode"] == "contention" and m["invariant"]["pass"], m
' "$out" || fail "the report of a short run: $out"
out=$("$bench" --durability as-is --mode contention --duration 1 --round 0.1 --pool 3 2>/dev/null)
grep -q "pools of min(threads, 3) connections" <<<"$out" || fail "the table's header: $out"

# The external mode: begin + complete beside the local path, without errors.
out=$("$bench" --durability as-is --mode external --threads 2 --duration 1 --round 0.1 --json 2>/dev/null)
status=$?
[ "$status" = 0 ] || fail "a short external run: exit $status"
python3 -c '
import json, sys
(m,) = json.loads(sys.argv[1])["results"]
assert m["mode"] == "external" and len(m["sides"]) == 2, m
assert all(s["ops"] > 0 and s["errors"] == 0 for s in m["sides"]), m
# The server is on this machine (tools/with-postgres): its CPU per call is counted.
assert all(s["server_cpu_us_per_op"] > 0 for s in m["sides"]), m
' "$out" || fail "the report of a short external run: $out"

# The pooler mode: the default setting against IDEM_POOLER_TRANSACTION directly, and
# through PgBouncer when tools/with-postgres --pgbouncer started one.
sides=2
[ -n "${IDEM_PGBOUNCER:-}" ] && sides=3
out=$("$bench" --durability as-is --mode pooler --threads 1 --duration 1 --round 0.1 --json 2>/dev/null)
status=$?
[ "$status" = 0 ] || fail "a short pooler run: exit $status"
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
sides = int(sys.argv[2])
new, replay = d["results"]
for m in (new, replay):
    assert m["mode"] == "pooler" and len(m["sides"]) == sides, m
    assert all(s["errors"] == 0 and s["ops"] > 0 for s in m["sides"]), m
    assert len(m["ratios"]) == sides - 1, m
assert "pooler-safe" in new["ratios"][0]["ratio"], new["ratios"]
' "$out" "$sides" || fail "the report of a short pooler run: $out"

# The rls mode: as the application's role, row-level security on against off.
out=$("$bench" --durability as-is --mode rls --threads 1 --duration 1 --round 0.1 --json 2>/dev/null)
status=$?
[ "$status" = 0 ] || fail "a short rls run: exit $status"
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
new, replay = d["results"]
for m in (new, replay):
    assert m["mode"] == "rls" and len(m["sides"]) == 2, m
    assert all(s["errors"] == 0 and s["ops"] > 0 for s in m["sides"]), m
    assert len(m["ratios"]) == 1 and "RLS on / RLS off" in m["ratios"][0]["ratio"], m
' "$out" || fail "the report of a short rls run: $out"

# The replay mode: idem's replays beside the bare read, and the bare read behind the
# tenant's setting (what row-level security's setting costs a lookup), in the run's
# database and in a fresh one; every ratio with its two sides' numbers; the report says
# the server's durability and the data directory's file system.
# By default the run flushes every commit: on this server (durability off, as the tests
# run it) idem-bench turns fsync, synchronous_commit and full_page_writes on for its run,
# says so, and gives the server its own settings back at the end.
before=$(psql -Atqc "SELECT current_setting('fsync') || current_setting('synchronous_commit')" dbname=postgres)
"$bench" --durability sometimes >/dev/null 2>&1
[ $? = 64 ] || fail "--durability sometimes: not a usage error"
out=$("$bench" --mode replay --threads 1 --duration 1 --round 0.1 --json 2>/dev/null)
status=$?
[ "$status" = 0 ] || fail "a short replay run: exit $status"
after=$(psql -Atqc "SELECT current_setting('fsync') || current_setting('synchronous_commit')" dbname=postgres)
[ "$before" = "$after" ] || fail "the server's durability after the run: $after, before it: $before"
python3 -c '
import json, sys
machine = json.loads(sys.argv[1])["machine"]
assert machine["durability"] == "fsync on, synchronous_commit on, full_page_writes on", machine
if sys.argv[2] != "onon":
    assert machine["durability_note"].startswith("turned on for this run"), machine
' "$out" "$before" || fail "the durability of a short replay run: $out"
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
warm, fresh = d["results"]
assert warm["mode"] == "replay" and fresh["mode"] == "replay-fresh", d["results"]
for m in (warm, fresh):
    assert len(m["sides"]) == 4, m
    assert all(s["errors"] == 0 and s["ops"] > 0 for s in m["sides"]), m
    assert any("tenant setting" in r["ratio"] for r in m["ratios"]), m["ratios"]
    assert all(r["a"] > 0 and r["b"] > 0 for r in m["ratios"]), m["ratios"]
machine = d["machine"]
assert machine["durability"].startswith("fsync "), machine
assert machine["data_directory"] and " on /" in machine["data_file_system"], machine
' "$out" || fail "the report of a short replay run: $out"

# The gateway mode (the in-process side of tools/bench/gateway.py): new keys created and
# replays replayed through the declared path, marked as the gateway marks them (attempt 1
# for a new key, 2 for a replay), without errors.
out=$("$bench" --durability as-is --mode gateway --threads 2 --duration 1 --round 0.1 --json 2>/dev/null)
status=$?
[ "$status" = 0 ] || fail "a short gateway run: exit $status"
python3 -c '
import json, sys
(m,) = json.loads(sys.argv[1])["results"]
assert m["mode"] == "gateway" and m["threads"] == 2, m
assert [s["side"] for s in m["sides"]] == ["in-process new keys", "in-process replays"], m
assert all(s["errors"] == 0 and s["ops"] > 0 for s in m["sides"]), m
' "$out" || fail "the report of a short gateway run: $out"

# The statement profile (--statements): refused, saying what the server lacks, where
# pg_stat_statements is not loaded; on a server that loads it (a throwaway one, as
# tools/run bench --statements starts), each side's statements per operation, the declared
# effect's one statement run once per call and the floor's writes its own.
err=$("$bench" --durability as-is --mode create --threads 1 --duration 1 --round 0.1 --statements 2>&1 >/dev/null)
status=$?
if psql -Atqc 'SHOW shared_preload_libraries' dbname=postgres | grep -q pg_stat_statements; then
    :
elif [ "$status" != 69 ] || ! grep -q "shared_preload_libraries = 'pg_stat_statements'" <<<"$err"; then
    fail "--statements without pg_stat_statements: exit $status, $err"
fi
with_postgres="$(dirname "$0")/../../tools/with-postgres"
out=$(WITH_POSTGRES_PRELOAD=pg_stat_statements "$with_postgres" "$bench" --mode create \
    --threads 1 --duration 1 --round 0.1 --statements --json 2>/dev/null)
status=$?
[ "$status" = 0 ] || fail "a short create run with --statements: exit $status"
python3 -c '
import json, sys
(m,) = json.loads(sys.argv[1])["results"]
sides = {s["side"]: s for s in m["sides"]}
for s in sides.values():
    assert s["statements"], s
    assert all(q["calls_per_op"] > 0 and q["us_per_call"] >= 0 for q in s["statements"]), s
# The declared statement in its plain form behind the settings statement, on the first
# create of a connection, and in its checked form on the others: one a create in all.
declared = [q for q in sides["idem declared SQL"]["statements"] if "INSERT INTO idem.operations" in q["query"]]
assert 1 <= len(declared) <= 2 and 0.9 < sum(q["calls_per_op"] for q in declared) < 1.1, sides["idem declared SQL"]
assert any("bench_article_ops" in q["query"] for q in sides["floor"]["statements"]), sides["floor"]
# The baselines are what a user writes: the floor one round trip of BEGIN, one statement
# writing the effect and its record, COMMIT; the hand-written side the article statements.
floor = [q for q in sides["floor"]["statements"] if "bench_article_ops" in q["query"]]
assert len(floor) == 1 and "support_tasks" in floor[0]["query"], floor
hand = " ".join(q["query"] for q in sides["hand-written"]["statements"])
assert "SELECT digest, response FROM public.bench_article_ops" in hand, hand
assert "INSERT INTO public.bench_article_ops VALUES" in hand, hand
assert not any("bench_article_ops" in q["query"] for q in sides["idem callback"]["statements"]), sides
' "$out" || fail "the statement profile of a short create run: $out"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "all idem-bench checks passed"
