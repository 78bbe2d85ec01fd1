#!/usr/bin/env bash
# test-secrets.sh MIGRATE SWEEP RECONCILE DEMO BENCH: a password in a connection string
# never appears in anything a tool prints, text or JSON, whatever goes wrong (a malformed
# URI, which libpq repeats whole in its message; a host that is not there; a database
# that does not exist).
set -uo pipefail
migrate=$1 sweep=$2 reconcile=$3 demo=$4 bench=$5
failures=0 n=0
secret=s3cr3tPW
# A password holding '/' and '@', which libpq cuts where a URI's user information would
# end: it repeats the pieces as a port or a host name. No piece may show either.
pieces=(Pw7x Qz9k Lm3v)
dsns=("postgresql://u:$secret@[::1/db"
    "host=/nonexistent user=u password=$secret dbname=x"
    "host=/nonexistent user=u password='$secret' dbname=x"
    "postgresql://u:$secret@/nonexistentdb?host=${PGHOST:-/tmp}"
    "postgresql://u:Pw7x/Qz9k@Lm3v@127.0.0.1/db"
    "postgresql://u:Pw7x@Qz9k/Lm3v@127.0.0.1/db")

# run NAME COMMAND...: fails when the output names the secret or a piece of one.
run() {
    local name=$1 out s
    shift
    n=$((n + 1))
    out=$(timeout 60 "$@" 2>&1 </dev/null)
    for s in "$secret" "${pieces[@]}"; do
        case "$out" in
        *"$s"*)
            echo "FAIL: $name shows the password ($s): $out" >&2
            failures=$((failures + 1))
            return
            ;;
        esac
    done
}

for dsn in "${dsns[@]}"; do
    for cmd in status "status --json" verify up plan; do
        run "idem-migrate $cmd" "$migrate" $cmd --dsn "$dsn"
    done
    run "idem-sweep" "$sweep" --dsn "$dsn" --verbose
    run "idem-sweep --json" "$sweep" --dsn "$dsn" --json
    run "idem-reconcile list" "$reconcile" list --dsn "$dsn"
    run "idem-reconcile list --json" "$reconcile" list --json --dsn "$dsn"
    run "idem-reconcile show" "$reconcile" show --dsn "$dsn" acme op-1
    run "idem-reconcile resolve" "$reconcile" resolve --dsn "$dsn" acme op-1 --note x
    run "idem-demo" "$demo" --dsn "$dsn"
    run "idem-bench" "$bench" --dsn "$dsn" --mode contention --duration 1
done

echo "$((n - failures)) of $n checks passed"
[ "$failures" = 0 ]
