#!/usr/bin/env bash
# test-gateway-bench.sh BUILD-ROOT SOURCE-ROOT: a short run of the gateway bench
# (tools/bench/gateway.py) against the server of tools/with-postgres: idem-gateway under
# wrk and idem-bench --mode gateway in a database without the example's table, every
# answer a 201, the rows the gateway created accounted for by its non-replayed 201s, both
# kinds of request in the table. No number is checked: it is a benchmark. Skipped (77)
# when wrk is not installed or the gateway is not built.
set -uo pipefail
build=$1 src=$2
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

if [ ! -x "$build/tools/idem-gateway/idem-gateway" ]; then
    echo "SKIPPED: idem-gateway is not built" >&2
    exit 77
fi
if ! command -v wrk >/dev/null; then
    echo "SKIPPED: wrk is not installed (tools/run bench installs it)" >&2
    exit 77
fi
if ! psql -Atqc 'SELECT 1' dbname=postgres >/dev/null 2>&1; then
    if [ -n "${IDEM_REQUIRE_PG:-}" ]; then
        echo "PostgreSQL required but unreachable" >&2
        exit 1
    fi
    echo "SKIPPED: no PostgreSQL server; run under tools/with-postgres" >&2
    exit 77
fi

out=$(python3 "$src/tools/bench/gateway.py" "$build" --connections 2 --duration 1 --rounds 1 \
    --pool 2 2>&1)
status=$?
[ "$status" = 0 ] || fail "a short run: exit $status: $out"
for what in "new keys" replays; do
    grep -Eq "^2 +$what " <<<"$out" || fail "no line for $what in the table: $out"
    grep -q "^2 connections, $what: rows created .*: ok$" <<<"$out" ||
        fail "the check of $what: $out"
done
grep -q "^target at" <<<"$out" && fail "targets printed without a run at 16 connections: $out"
grep -q "fsync " <<<"$out" || fail "the report does not say the server's durability: $out"
psql -Atqc "SELECT datname FROM pg_database WHERE datname LIKE 'idem_gwbench_%'" dbname=postgres |
    grep -q . && fail "the bench's database is left behind"

python3 "$src/tools/bench/gateway.py" "$build" --connections 0 >/dev/null 2>&1
[ $? = 2 ] || fail "--connections 0: not a usage error"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "all gateway bench checks passed"
