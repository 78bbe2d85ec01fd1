#!/usr/bin/env bash
# check-skip.sh INTEGRATION-TEST: with no server to reach, an integration executable exits
# 77 (meson's SKIP) without running its tests, and 1 when IDEM_REQUIRE_PG demands a server.
set -uo pipefail
exe=$1
nowhere=(PGHOST=/nonexistent PGPORT=1)

out=$(env -u PGSERVICE -u PGHOSTADDR -u IDEM_REQUIRE_PG "${nowhere[@]}" "$exe" 2>&1)
rc=$?
if [ "$rc" != 77 ] || ! grep -q '^SKIPPED: no PostgreSQL server' <<<"$out" ||
    grep -q 'Synthesis' <<<"$out"; then
    echo "without a server: exit $rc, expected 77 and no tests run; output:" >&2
    echo "$out" >&2
    exit 1
fi
out=$(env -u PGSERVICE -u PGHOSTADDR "${nowhere[@]}" IDEM_REQUIRE_PG=1 "$exe" 2>&1)
rc=$?
if [ "$rc" != 1 ] || ! grep -q 'PostgreSQL required but unreachable' <<<"$out"; then
    echo "without a server, IDEM_REQUIRE_PG set: exit $rc, expected 1; output:" >&2
    echo "$out" >&2
    exit 1
fi
echo "skips without a server (77), fails when one is required"
