#!/usr/bin/env bash
# test-help-version.sh TOOL...: every tool answers --help and -h with its usage on stdout
# and exit 0, and --version and -V with "NAME VERSION" on stdout and exit 0, nothing on
# stderr; the exit codes its --help lists are those the one table of tools/README.md
# gives it, and that table's codes are those of tools/common/exit.h; no server needed.
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

top=$(cd "$(dirname "$0")/../.." && pwd)
# The codes of the table under "## Exit status" in tools/README.md whose "given by" column
# names $1 (every code when $1 is empty), one per line.
table_codes() {
    sed -n '/^## Exit status/,/^### /p' "$top/tools/README.md" |
        awk -F' [|] ' -v tool="$1" '/^[|] `[0-9]+` [|]/ {
            code = $1; gsub(/[^0-9]/, "", code)
            if (tool == "") { print code; next }
            n = split($3, by, /, */)
            for (i = 1; i <= n; i++) { gsub(/[ |]/, "", by[i]); if (by[i] == tool) print code }
        }'
}
# The codes a --help text lists under "Exit status:", one per line.
help_codes() { sed -n '/^Exit status:/,$p' | sed -n 's/^ \{1,3\}\([0-9]\{1,3\}\)  .*/\1/p'; }

for tool in "$@"; do
    name=$(basename "$tool")
    run "$name --help" "^usage: $name" "$tool" --help
    run "$name -h" "^usage: $name" "$tool" -h
    run "$name --version" "^$name [0-9]" "$tool" --version
    run "$name -V" "^$name [0-9]" "$tool" -V
    help=$("$tool" --help | help_codes | tr '\n' ' ')
    table=$(table_codes "$name" | tr '\n' ' ')
    [ -z "$help$table" ] && continue # not an operator's tool (idem-demo, idem-bench)
    n=$((n + 1))
    [ "$help" = "$table" ] ||
        fail "$name: --help lists exit codes '$help', tools/README.md's table gives it '$table'"
done
n=$((n + 1))
header=$(sed -n 's/^ *EXIT_[A-Z_]* = \([0-9]*\),.*/\1/p' "$top/tools/common/exit.h" | tr '\n' ' ')
[ "$header" = "$(table_codes "" | tr '\n' ' ')" ] ||
    fail "tools/common/exit.h has the codes '$header', tools/README.md's table '$(table_codes "" | tr '\n' ' ')'"

echo "$((n - failures)) of $n checks passed"
[ "$failures" = 0 ]
