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

# The canonical form, byte-exact, with no trailing newline.
got=$(echo '{"b":2,"a":1}' | "$tool" --canonical | od -An -c | tr -d ' \n')
[ "$got" = '{"a":1,"b":2}' ] || fail "canonical: got bytes '$got'"

expect canonical-vector 0 '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'"'"'B\"\\\\\"/"}' \
    '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'"'"'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}' \
    --canonical

# The fingerprint is the SHA-256 of {"arguments":...,"tool":...,"version":...}.
expect fingerprint 0 3ff5dfbb2b521825653ac4acabb258135d1b7aa96b8de00f892ec678f39d0b00 \
    '{"b":2,"a":1}' --tool t --version 1
expect same-request-other-spelling 0 3ff5dfbb2b521825653ac4acabb258135d1b7aa96b8de00f892ec678f39d0b00 \
    ' { "a" : 1.0 , "b" : 2e0 } ' --tool t --version 1
expect request-bytes 0 '{"arguments":{"a":1,"b":2},"tool":"t","version":1}' \
    '{"b":2,"a":1}' --canonical --tool t --version 1
if command -v sha256sum >/dev/null; then
    sum=$(echo '[1,{"y":"é","x":null}]' | "$tool" --canonical --tool a.b --version 7 | sha256sum | cut -c1-64)
    expect request-bytes-hash 0 "$sum" '[1,{"y":"é","x":null}]' --tool a.b --version 7
fi

# Invalid input: 65 and a message with the position and the reason.
expect bad-json 65 '' '{"a":1,}' --canonical
err=$(printf '{"a":1,\n "a":2}' | "$tool" --canonical 2>&1 >/dev/null)
case "$err" in
*"line 2"*"position"*"duplicate object key"*) ;;
*) fail "bad-json message: '$err'" ;;
esac
expect lone-surrogate 65 '' '["\ud800"]' --canonical
expect nan 65 '' '[NaN]' --tool t --version 1
expect over-max-bytes 65 '' '[1,2,3]' --canonical --max-bytes 6
expect at-max-bytes 0 '[1,2,3]' '[1,2,3]' --canonical --max-bytes 7

# Usage errors: 64.
expect no-mode 64 '' '{}'
expect tool-without-version 64 '' '{}' --tool t
expect bad-tool-name 64 '' '{}' --tool 'Bad Name' --version 1
expect bad-version 64 '' '{}' --tool t --version 0
expect unknown-option 64 '' '{}' --frobnicate
expect extra-argument 64 '' '{}' --canonical extra
expect bad-max-bytes 64 '' '{}' --canonical --max-bytes -1
expect help 0 '*' '' --help

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "all idem-fingerprint checks passed"
