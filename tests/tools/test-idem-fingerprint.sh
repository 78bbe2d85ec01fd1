#!/usr/bin/env bash
# test-idem-fingerprint.sh PATH-TO-idem-fingerprint: the command line tool's contract.
set -uo pipefail
tool=$1
failures=0
errfile=$(mktemp)
trap 'rm -f "$errfile"' EXIT

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# expect NAME WANT-STATUS WANT-STDOUT INPUT ARGS...: run the tool on INPUT.
expect() {
    local name=$1 want_status=$2 want_out=$3 input=$4 out status
    shift 4
    out=$(printf '%s' "$input" | "$tool" "$@" 2>"$errfile")
    status=$?
    [ "$status" = "$want_status" ] || fail "$name: exit $status, expected $want_status ($(cat "$errfile"))"
    [ "$want_out" = "*" ] || [ "$out" = "$want_out" ] || fail "$name: printed '$out', expected '$want_out'"
}

# bytes ARGS...: the tool's stdout for '{"b":2,"a":1}', every byte shown by od.
bytes() { echo '{"b":2,"a":1}' | "$tool" "$@" | od -An -c | tr -d ' \n'; }

# The canonical form ends with a newline, like every output; -n prints the exact bytes.
got=$(bytes --canonical)
[ "$got" = '{"a":1,"b":2}\n' ] || fail "canonical: got bytes '$got'"
got=$(bytes --canonical -n)
[ "$got" = '{"a":1,"b":2}' ] || fail "canonical --no-newline: got bytes '$got'"
got=$(bytes --canonical --no-newline --tool t --payload-version 1)
[ "$got" = '{"arguments":{"a":1,"b":2},"tool":"t","version":1}' ] ||
    fail "request bytes --no-newline: got '$got'"
got=$(bytes --tool t --payload-version 1 | cut -c 61-)
[ "$got" = '0b00\n' ] || fail "fingerprint: got bytes '...$got'"
got=$(bytes --tool t --payload-version 1 -n | cut -c 61-)
[ "$got" = '0b00' ] || fail "fingerprint --no-newline: got bytes '...$got'"

expect canonical-vector 0 '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'"'"'B\"\\\\\"/"}' \
    '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'"'"'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}' \
    --canonical

# The fingerprint is the SHA-256 of {"arguments":...,"tool":...,"version":...}.
expect fingerprint 0 3ff5dfbb2b521825653ac4acabb258135d1b7aa96b8de00f892ec678f39d0b00 \
    '{"b":2,"a":1}' --tool t --payload-version 1
expect same-request-other-spelling 0 3ff5dfbb2b521825653ac4acabb258135d1b7aa96b8de00f892ec678f39d0b00 \
    ' { "a" : 1.0 , "b" : 2e0 } ' --tool t --payload-version 1
expect request-bytes 0 '{"arguments":{"a":1,"b":2},"tool":"t","version":1}' \
    '{"b":2,"a":1}' --canonical --tool t --payload-version 1
if command -v sha256sum >/dev/null; then
    sum=$(echo '[1,{"y":"é","x":null}]' | "$tool" --canonical --tool a.b --payload-version 7 -n | sha256sum | cut -c1-64)
    expect request-bytes-hash 0 "$sum" '[1,{"y":"é","x":null}]' --tool a.b --payload-version 7
fi

# Invalid input: 65 and a message with the position and the reason.
expect bad-json 65 '' '{"a":1,}' --canonical
err=$(printf '{"a":1,\n "a":2}' | "$tool" --canonical 2>&1 >/dev/null)
case "$err" in
*"line 2"*"position"*"duplicate object key"*) ;;
*) fail "bad-json message: '$err'" ;;
esac
expect lone-surrogate 65 '' '["\ud800"]' --canonical
expect nan 65 '' '[NaN]' --tool t --payload-version 1

# Input longer than --max-bytes: its own exit status, and a message with both sizes.
expect over-max-bytes 65 '' '[1,2,3]' --canonical --max-bytes 6
err=$(printf '[1,2,3]' | "$tool" --canonical --max-bytes 6 2>&1 >/dev/null)
case "$err" in
*"input is 7 bytes"*"limit of 6 bytes"*"--max-bytes"*) ;;
*) fail "over-max-bytes message: '$err'" ;;
esac
err=$(head -c 3000000 /dev/zero | "$tool" --canonical 2>&1 >/dev/null)
case "$err" in
*"input is 3000000 bytes"*"limit of 1048576 bytes"*) ;;
*) fail "over default max-bytes message: '$err'" ;;
esac
expect at-max-bytes 0 '[1,2,3]' '[1,2,3]' --canonical --max-bytes 7

# Usage errors: 64.
expect no-mode 64 '' '{}'
expect tool-without-payload-version 64 '' '{}' --tool t
expect payload-version-without-tool 64 '' '{}' --payload-version 1
expect bad-tool-name 64 '' '{}' --tool 'Bad Name' --payload-version 1
expect bad-payload-version 64 '' '{}' --tool t --payload-version 0
expect unknown-option 64 '' '{}' --frobnicate
expect extra-argument 64 '' '{}' --canonical extra
expect bad-max-bytes 64 '' '{}' --canonical --max-bytes -1
expect help 0 '*' '' --help
help=$("$tool" --help)
case "$help" in
*"--payload-version N"*"-V, --version"*"Exit status:"*"65  invalid JSON"*"or the"*"input is longer than --max-bytes"*) ;;
*) fail "help: '$help'" ;;
esac

# --version prints the program's version; the payload version is --payload-version.
"$tool" --version | grep -Eq '^idem-fingerprint [0-9]+\.[0-9]+\.[0-9]+$' ||
    fail "version: '$("$tool" --version)'"
expect old-version-option 64 '' '{}' --tool t --version 1
grep -q -- '--payload-version N' "$errfile" || fail "old-version-option message: $(cat "$errfile")"
expect version-with-value 64 '' '{}' --version=1
expect version-with-mode 64 '' '{}' --canonical --version

# A request's arguments are read as the store reads them: an integer beyond 2^53 is
# refused (send it as a string); plain canonical JSON keeps RFC 8785's doubles.
expect big-integer-argument 65 '' '{"customer":1234567890123456789}' --tool t --payload-version 1
grep -q 'as a string' "$errfile" || fail "big-integer-argument message: $(cat "$errfile")"
expect big-integer-canonical 0 '*' '{"n":1234567890123456789}' --canonical

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "all idem-fingerprint checks passed"
