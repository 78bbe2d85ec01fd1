#!/usr/bin/env bash
# check-demo.sh IDEM-DEMO IDEM-MIGRATE: on a fresh database, the demo prints the
# lost-response transcript from real calls, then the tenant and second-intent lines, then
# the durable intent recovered after a crash (a replay, one task); and
# the same through PgBouncer in transaction mode (when tools/with-postgres --pgbouncer
# started one), the schema applied directly with idem-migrate first.
set -euo pipefail
# Output is matched from here-strings, not "echo | grep -q": bash writes echo's lines one
# by one, and grep -q, done at its match, can end the pipe before the last (SIGPIPE, which
# pipefail makes the pipeline's failure).
demo=$1 migrate=$2
if ! psql -Atqc 'select 1' dbname=postgres >/dev/null 2>&1; then
    [ -n "${IDEM_REQUIRE_PG:-}" ] && { echo "PostgreSQL required but unreachable" >&2; exit 1; }
    echo "SKIPPED: no PostgreSQL server; run under tools/with-postgres" >&2
    exit 77
fi
db="t_demo_$$_$SRANDOM" # the pid alone comes round again in a long run
psql -Atqc "CREATE DATABASE $db" dbname=postgres
out=$("$demo" --dsn "dbname=$db")
expected='Committed, but response was lost
After timeout: tasks=1 operations=1
Retry: {"status": "created", "task_id": 1}
After retry: tasks=1 operations=1
Conflict: Same operation ID used with different arguments'
if [ "$(echo "$out" | head -n 5)" != "$expected" ]; then
    echo "unexpected transcript:" >&2
    echo "$out" >&2
    exit 1
fi
grep -q '^Tenant globex, same operation ID: created {"status": "created", "task_id": 2}' <<<"$out" ||
    { echo "tenant line missing: $out" >&2; exit 1; }
grep -q '^Second intent, same subject, new operation ID: created {"status": "created", "task_id": 3}' <<<"$out" ||
    { echo "second intent line missing: $out" >&2; exit 1; }
# The durable intent: worker 2 recovers it after worker 1's crash and replays; one task.
grep -q '^Worker 1 approved a refund (intent approved), its effect committed, then the worker crashed$' <<<"$out" ||
    { echo "intent approval line missing: $out" >&2; exit 1; }
grep -q '^Worker 2 recovered it: replayed {"status": "created", "task_id": 4}, intent done$' <<<"$out" ||
    { echo "intent recovery line missing: $out" >&2; exit 1; }
grep -q '^After recovery: tasks=1 operations=1$' <<<"$out" ||
    { echo "intent counts line missing: $out" >&2; exit 1; }
[ "$(psql -Atqc "select state from idem.intents" "dbname=$db")" = done ]
# Nothing else was created: four tasks, four operations.
[ "$(psql -Atqc 'select count(*) from idem_example.support_tasks' "dbname=$db")" = 4 ]
[ "$(psql -Atqc 'select count(*) from idem.operations' "dbname=$db")" = 4 ]
# The example's table is its own, outside idem's schema.
[ "$(psql -Atqc "select to_regclass('idem.support_tasks') is null" "dbname=$db")" = t ]
# A second run against the same database is still correct (new operation IDs).
out2=$("$demo" --dsn "dbname=$db")
grep -q '^After retry: tasks=1 operations=1$' <<<"$out2" || { echo "$out2" >&2; exit 1; }

if [ -n "${IDEM_PGBOUNCER:-}" ]; then
    db="t_demo_pgb_$$_$SRANDOM"
    psql -Atqc "CREATE DATABASE $db" dbname=postgres
    # Through the pooler the demo does not migrate: it says how to.
    if out=$("$demo" --dsn "$IDEM_PGBOUNCER dbname=$db" 2>&1); then
        echo "an unmigrated database through PgBouncer was not refused: $out" >&2
        exit 1
    fi
    grep -q 'idem-migrate up over a direct connection' <<<"$out" || { echo "$out" >&2; exit 1; }
    "$migrate" --dsn "dbname=$db" -q up
    out=$("$demo" --dsn "$IDEM_PGBOUNCER dbname=$db")
    if [ "$(echo "$out" | head -n 5)" != "$expected" ]; then
        echo "unexpected transcript through PgBouncer:" >&2
        echo "$out" >&2
        exit 1
    fi
    grep -q '^After recovery: tasks=1 operations=1$' <<<"$out" || { echo "$out" >&2; exit 1; }
    [ "$(psql -Atqc 'select count(*) from idem.operations' "dbname=$db")" = 4 ]
    echo "demo transcript as expected, directly and through PgBouncer"
else
    echo "demo transcript as expected (no PgBouncer: run under tools/with-postgres --pgbouncer)"
fi
