#!/usr/bin/env bash
# test-run-packages.sh PATH-TO-tools/run: each command asks for the Debian packages it
# uses and no others. A non-root user with nothing installed (stubs for dpkg-query and
# id) is told what to install; tools/run stops there, before building anything.
set -uo pipefail
run=$1
failures=0
stubs=$(mktemp -d)
trap 'rm -rf "$stubs"' EXIT

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

printf '#!/bin/sh\nexit 1\n' >"$stubs/dpkg-query"
printf '#!/bin/sh\n[ "$1" = -u ] && { echo 1000; exit 0; }\nexec /usr/bin/id "$@"\n' >"$stubs/id"
chmod +x "$stubs/dpkg-query" "$stubs/id"

# asked CMD: the packages tools/run CMD names as missing, one per line, sorted.
asked() {
    local err status
    err=$(PATH="$stubs:$PATH" "$run" "$1" 2>&1 >/dev/null)
    status=$?
    [ "$status" = 69 ] || fail "$1: exit $status, expected 69 ($err)"
    sed -n 's/^tools\/run: missing Debian packages: //p' <<<"$err" | tr ' ' '\n' | sort
}

# check CMD WANT...: tools/run CMD asks for exactly WANT, and tools/run packages CMD agrees.
check() {
    local cmd=$1 want got listed
    shift
    want=$(printf '%s\n' "$@" | sort)
    got=$(asked "$cmd")
    [ "$got" = "$want" ] || fail "$cmd asks for: $(echo $got); expected: $(echo $want)"
    listed=$("$run" packages "$cmd" | tr ' ' '\n' | sort)
    [ "$listed" = "$want" ] || fail "packages $cmd: $(echo $listed); expected: $(echo $want)"
}

build=(gcc libc6-dev meson ninja-build pkg-config libpq-dev libjansson-dev libssl-dev
    libmicrohttpd-dev libcurl4-openssl-dev)
check build "${build[@]}"
check demo "${build[@]}" postgresql-15
check bench "${build[@]}" postgresql-15 pgbouncer wrk python3
check test "${build[@]}" postgresql-15 libcriterion-dev clang-format binutils procps python3 \
    pgbouncer curl mandoc prometheus wrk locales

"$run" packages frobnicate >/dev/null 2>&1
[ $? = 64 ] || fail "packages of an unknown command: not a usage error"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "all tools/run package checks passed"
