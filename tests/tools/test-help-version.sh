#!/usr/bin/env bash
# test-help-version.sh TOOL...: every tool answers --help and -h with its usage on stdout
# and exit 0, and --version and -V with "NAME VERSION" on stdout and exit 0, nothing on
# stderr; no server needed.
set -uo pipefail
failures=0 n=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# run NAME WANT-STDOUT-PATTERN COMMAND...: exit 0, stdout matching, stderr empty.
run() {
    local name=$1 pattern=$2 out err status
    shift 2
    n=$((n + 1))
    out=$("$@" 2>"$scratch/stderr")
    status=$?
    err=$(cat "$scratch/stderr")
    [ "$status" = 0 ] || { fail "$name: exit $status, expected 0: $out $err"; return; }
    [ -z "$err" ] || { fail "$name: wrote on stderr: $err"; return; }
    grep -q -- "$pattern" <<<"$out" || fail "$name: stdout lacks '$pattern': $out"
}

for tool in "$@"; do
    name=$(basename "$tool")
    run "$name --help" "^usage: $name" "$tool" --help
    run "$name -h" "^usage: $name" "$tool" -h
    run "$name --version" "^$name [0-9]" "$tool" --version
    run "$name -V" "^$name [0-9]" "$tool" -V
done

echo "$((n - failures)) of $n checks passed"
[ "$failures" = 0 ]
