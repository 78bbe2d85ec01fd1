#!/usr/bin/env bash
# check-demo.sh IDEM-DEMO: on a fresh database, the demo prints the lost-response
# transcript from real calls, then the tenant and second-intent lines.
set -euo pipefail
demo=$1
if ! psql -Atqc 'select 1' dbname=postgres >/dev/null 2>&1; then
    [ -n "${IDEM_REQUIRE_PG:-}" ] && { echo "PostgreSQL required but unreachable" >&2; exit 1; }
    echo "SKIPPED: no PostgreSQL server; run under tools/with-postgres" >&2
    exit 77
fi
db="t_demo_$$"
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
echo "$out" | grep -q '^Tenant globex, same operation ID: created {"status": "created", "task_id": 2}' ||
    { echo "tenant line missing: $out" >&2; exit 1; }
echo "$out" | grep -q '^Second intent, same subject, new operation ID: created {"status": "created", "task_id": 3}' ||
    { echo "second intent line missing: $out" >&2; exit 1; }
# Nothing else was created: three tasks, three operations.
[ "$(psql -Atqc 'select count(*) from idem_example.support_tasks' "dbname=$db")" = 3 ]
[ "$(psql -Atqc 'select count(*) from idem.operations' "dbname=$db")" = 3 ]
# The example's table is its own, outside idem's schema.
[ "$(psql -Atqc "select to_regclass('idem.support_tasks') is null" "dbname=$db")" = t ]
# A second run against the same database is still correct (new operation IDs).
out2=$("$demo" --dsn "dbname=$db")
echo "$out2" | grep -q '^After retry: tasks=1 operations=1$' || { echo "$out2" >&2; exit 1; }
echo "demo transcript as expected"
