#!/usr/bin/env bash
# test-gateway-bench.sh BUILD-ROOT SOURCE-ROOT: a short run of the gateway bench
# (tools/bench/gateway.py) against the server of tools/with-postgres: idem-gateway under
# wrk and idem-bench --mode gateway in a database without the example's table, every
# answer a 201, the rows the gateway created accounted for by its non-replayed 201s, both
# kinds of request in the table. No number is checked: it is a benchmark. Skipped (77)
# when the gateway is not built, and when wrk is not installed (unless IDEM_CI=1: then it
# fails).
set -uo pipefail
build=$1 src=$2
prefix=gwbench

if [ ! -x "$build/tools/idem-gateway/idem-gateway" ]; then
    echo "SKIPPED: idem-gateway is not built" >&2
    exit 77
fi
. "$(dirname "$0")/need.sh"
need wrk "apt-get install wrk"
. "$(dirname "$0")/common.sh"

bench() { python3 "$src/tools/bench/gateway.py" "$build" "$@"; }

check "a short run" 0 bench --connections 2 --duration 2 --rounds 2 --pool 2 --warm-up 0
# Each round's CPU ratios said as it ends, the gateway's runs first in round 1 and second in
# round 2 (next to the minimal server's, the order turned round).
expect "the gateway first in round 1, second in round 2" python3 -c '
import re, sys
said = re.findall(r"^gateway bench: +CPU a call, gateway / minimal server \(the gateway"
                  r" (first|second)\): new keys [\d.]+ \(.*\), replays [\d.]+ \(.*\)$",
                  sys.argv[1], re.M)
assert said == ["first", "second"], said
' "$err"
for what in "new keys" replays; do
    expect "a line for $what in the table" grep -Eq "^2 +$what " <<<"$out"
    expect "the check of $what passed" grep -q "^2 connections, $what: rows created .*: ok$" \
        <<<"$out"
done
expect "the HTTP exchange alone measured" grep -Eq "GET /healthz under wrk .*[1-9][0-9]* ops/s" \
    <<<"$out"
# The last columns of each line: all the CPU per request (gateway, in process, HTTP
# exchange), the bound, the load averages; each CPU figure counted, the bound a ratio.
expect "the CPU per request and the bound" python3 -c '
import re, sys
rows = [l for l in sys.argv[1].splitlines() if re.match(r"2 +(new keys|replays) ", l)]
assert len(rows) == 2, rows
for l in rows:
    m = re.search(r" +(\d+)/ *(\d+)/ *(\d+) +([\d.]+)  [\d.]+ \.\. [\d.]+$", l)
    assert m, l
    assert all(int(x) > 0 for x in m.groups()[:3]) and 0 < float(m.group(4)) <= 1, l
' "$out"
# idem-gateway's own CPU per call beside the minimal libmicrohttpd server's, both counted.
expect "the gateway's CPU per call beside the minimal server's" python3 -c '
import re, sys
rows = [l for l in sys.argv[1].splitlines() if re.match(r"cpu 2 +(new keys|replays) ", l)]
assert len(rows) == 2, rows
for l in rows:
    m = re.search(r" ([\d.]+) +([\d.]+) +([\d.]+) +\[([\d.]+)-([\d.]+)\] +(met|MISSED) ", l)
    assert m and all(float(x) > 0 for x in m.groups()[:5]), l
    # the median of the rounds lies within them, and the verdict follows it
    assert float(m.group(4)) <= float(m.group(3)) <= float(m.group(5)), l
    assert (m.group(6) == "met") == (float(m.group(3)) <= 1.5), l
' "$out"
# And beside the minimal server in its record modes (the INSERT and a record of the call in
# one transaction: on a lean table, as a row of idem.operations), for new keys only,
# without a target, and the idem-record mode over the plain one; then each process's CPU per
# call as user and system time.
expect "the gateway's CPU per call beside the minimal server's record modes" python3 -c '
import re, sys
rows = [l for l in sys.argv[1].splitlines() if re.match(r"cpu-rec 2 +", l)]
assert len(rows) == 1 and " new keys " in rows[0], rows
m = re.search(r" ([\d.]+) +([\d.]+) +([\d.]+) +\[([\d.]+)-([\d.]+)\]"
              r" +([\d.]+) +([\d.]+) +\[([\d.]+)-([\d.]+)\]"
              r" +([\d.]+) +\[([\d.]+)-([\d.]+)\] +[\d.]+$", rows[0])
assert m and all(float(x) > 0 for x in m.groups()), rows[0]
for at in (3, 7, 10):
    assert float(m.group(at + 1)) <= float(m.group(at)) <= float(m.group(at + 2)), rows[0]
' "$out"
expect "user and system CPU per call of each process" python3 -c '
import re, sys
rows = [l for l in sys.argv[1].splitlines() if re.match(r"cpu-part 2 +", l)]
assert len(rows) == 2, rows
new = [l for l in rows if " new keys " in l][0]
parts = re.findall(r"([\d.]+) / ([\d.]+)", new)
assert len(parts) == 4 and all(float(u) + float(k) > 0 for u, k in parts), new
replay = [l for l in rows if " replays " in l][0]
assert len(re.findall(r"([\d.]+) / ([\d.]+)", replay)) == 2, replay
' "$out"
expect "the idem-record mode's check" grep -q "^2 connections, new keys: .*in its idem-record mode: rows created [1-9]" <<<"$out"
expect "no targets without a run at 16 connections" lacks "target at"
expect "the server's durability said" contains "fsync "
leftover=$(q postgres "SELECT datname FROM pg_database WHERE datname LIKE 'idem_gwbench_%'")
expect "the bench's database dropped" test -z "$leftover"

expect "no warm-up said" contains "no run after a warm-up (--warm-up 0)"

check "--connections 0 is a usage error" 2 bench --connections 0
check "--warm-up -1 is a usage error" 2 bench --warm-up -1
finish
