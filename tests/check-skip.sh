#!/usr/bin/env bash
# check-skip.sh BUILD-DIR: with no server to reach, every test outside the unit suite (the
# integration, pgbouncer and fault suites: each needs the server of tools/with-postgres)
# exits 77 (meson's SKIP) without running its tests, and 1 when IDEM_REQUIRE_PG demands a
# server. The tests are meson's own list (meson-info/intro-tests.json), each run as meson
# runs it, so a test added without the check is caught.
set -uo pipefail
build=$1
# Pointed at a server that is not there, and told nothing of the one tools/with-postgres
# may have started for the rest of the suite (a test that did not skip must not reach it,
# let alone restart it).
nowhere=(-u PGSERVICE -u PGHOSTADDR -u IDEM_REQUIRE_PG -u IDEM_PG_CTL -u IDEM_PG_TCP
    -u IDEM_PGBOUNCER -u IDEM_CITUS_WORKERS PGHOST=/nonexistent PGPORT=1)

# Each test as NUL-terminated fields: name, the number of its environment entries, the
# entries (NAME=value), the number of its command's words, the words.
mapfile -d '' fields < <(python3 - "$build/meson-info/intro-tests.json" <<'PY'
import json, sys
for t in json.load(open(sys.argv[1])):
    if any(s.split(":")[-1] == "unit" for s in t["suite"]):
        continue
    env = [f"{k}={v}" for k, v in (t["env"] or {}).items()]
    for field in [t["name"], str(len(env)), *env, str(len(t["cmd"])), *t["cmd"]]:
        sys.stdout.write(field + "\0")
PY
)

failures=0 checked=0
fail() {
    echo "$1" >&2
    echo "$2" >&2
    failures=$((failures + 1))
}

# check NAME ENV... -- CMD...: both runs of one test.
check() {
    local name=$1 out rc env=()
    shift
    while [ "$1" != -- ]; do
        env+=("$1")
        shift
    done
    shift
    out=$(cd "$build" && env "${nowhere[@]}" "${env[@]}" "$@" 2>&1 </dev/null)
    rc=$?
    if [ "$rc" != 77 ] || ! grep -q '^SKIPPED: no PostgreSQL server' <<<"$out" ||
        grep -q 'Synthesis' <<<"$out"; then
        fail "$name without a server: exit $rc, expected 77 and no tests run; output:" "$out"
    fi
    out=$(cd "$build" && env "${nowhere[@]}" "${env[@]}" IDEM_REQUIRE_PG=1 "$@" 2>&1 </dev/null)
    rc=$?
    if [ "$rc" != 1 ] || ! grep -q 'PostgreSQL required but unreachable' <<<"$out"; then
        fail "$name without a server, IDEM_REQUIRE_PG set: exit $rc, expected 1; output:" "$out"
    fi
    checked=$((checked + 1))
}

i=0
while [ "$i" -lt "${#fields[@]}" ]; do
    name=${fields[i]} nenv=${fields[i + 1]}
    env=("${fields[@]:i+2:nenv}")
    i=$((i + 2 + nenv))
    ncmd=${fields[i]}
    cmd=("${fields[@]:i+1:ncmd}")
    i=$((i + 1 + ncmd))
    check "$name" "${env[@]}" -- "${cmd[@]}"
done

if [ "$checked" = 0 ]; then
    echo "no test outside the unit suite in $build/meson-info/intro-tests.json" >&2
    exit 1
fi
if [ "$failures" != 0 ]; then
    echo "$failures of $((checked * 2)) runs did not skip or fail as they should" >&2
    exit 1
fi
echo "$checked tests skip without a server (77), and fail when one is required"
