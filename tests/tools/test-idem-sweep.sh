#!/usr/bin/env bash
# test-idem-sweep.sh IDEM-SWEEP IDEM-MIGRATE: the sweeper's command line, output, metrics
# file and exit codes, against the server of tools/with-postgres. Time passes by
# backdating columns, never by sleeping.
set -uo pipefail
tool=$1 migrate=$2 prefix=st
. "$(dirname "$0")/common.sh"

# records DB PREFIX N STATE EXPIRES_IN FORGET_IN: N records of tenant acme.
records() {
    q "$1" "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,
        state, response, claim_token, completed_at, expires_at, forget_at, expired_at)
        SELECT 'acme', '$2' || i, 't', 1, sha256(('$2' || i)::bytea), '$4',
        CASE WHEN '$4' IN ('completed', 'failed') THEN convert_to('{}', 'UTF8') END,
        gen_random_uuid(), CASE WHEN '$4' <> 'pending' THEN now() END,
        now() + interval '$5', now() + interval '$6', CASE WHEN '$4' = 'expired' THEN now() END
        FROM generate_series(1, $3) i"
}
count() { q "$1" "SELECT count(*) FROM idem.operations WHERE state = '$2'"; }
digest() { q "$1" "SELECT md5(string_agg(o::text, ',' ORDER BY operation_id)) FROM idem.operations o"; }

# The contract is in --help (tests/tools/test-help-version.sh checks its codes against
# the table of tools/README.md).
check help 0 "$tool" --help
expect help_lists_exit_codes contains "75  try again later"
check version 0 "$tool" --version
check usage_bad_option 64 "$tool" --frob
check usage_operand 64 "$tool" extra
check usage_bad_batch 64 "$tool" --batch 0
check usage_batch_not_number 64 "$tool" --batch ten
check usage_bad_runtime 64 "$tool" --max-runtime -1
check usage_empty_metrics 64 "$tool" --metrics-file ''
# Key memory within the windows the library accepts: 1 s to 3650 days.
check usage_key_memory_beyond_longest_window 64 "$tool" --key-memory 315360001
expect usage_key_memory_names_the_bounds err_contains "from 1 to 315360000"
check usage_key_memory_zero 64 "$tool" --key-memory 0
expect usage_says_try_help err_contains "Try 'idem-sweep --help'"
check no_server 75 "$tool" --dsn "host=/nonexistent port=1"
expect no_server_says_so err_contains "cannot connect"
expect no_server_one_line test "$(wc -l <<<"$err")" = 1
silent_listener
check silent_server 75 timeout 30 "$tool" --dsn "host=127.0.0.1 port=$silent_port" --connect-timeout 2
expect silent_server_says_timeout err_contains "timeout expired"
silent_stop

# Connection settings that cannot work are an error (1), not "unavailable" (75, which
# tells cron to try again): they never fix themselves.
check dsn_unknown_key 78 "$tool" --dsn "nokey=1"
expect dsn_unknown_key_says_so err_contains 'invalid connection option "nokey"'
check dsn_missing_equals 78 "$tool" --dsn "host=x missing"
check dsn_bad_sslmode 78 "$tool" --dsn "sslmode=bogus"
check dsn_bad_connect_timeout 78 "$tool" --dsn "connect_timeout=abc"
expect dsn_bad_connect_timeout_says_so err_contains 'invalid integer value "abc"'
check no_such_database 78 "$tool" --dsn "dbname=idem_no_such_database"
expect no_such_database_says_so err_contains "does not exist"
check no_such_role 78 "$tool" --dsn "user=idem_no_such_role"
check dsn_bad_port 78 "$tool" --dsn "port=notaport"
# Through PgBouncer, which passes the server's refusal on (and leaves PQping() without an
# answer): a role it knows that the server does not have, a database the server does not
# have, a role it does not know itself. Names of this run's own, so that no other test
# meets the same PgBouncer pool, which after a failed server login makes clients wait.
if [ -n "${IDEM_PGBOUNCER:-}" ]; then
    ghost_db=$(newdb ghost)
    check pooler_no_such_role 78 "$tool" --dsn "$IDEM_PGBOUNCER dbname=$ghost_db user=idem_test_ghost"
    expect pooler_no_such_role_says_so err_contains 'role "idem_test_ghost" does not exist'
    check pooler_no_such_database 78 "$tool" --dsn "$IDEM_PGBOUNCER dbname=${ghost_db}_none"
    check pooler_unknown_role 78 "$tool" --dsn "$IDEM_PGBOUNCER dbname=$ghost_db user=idem_no_such_role"
fi
# A server that answers but is busy ("too many connections", 53300) is unavailable: 75.
create_role idem_test_no_slots "LOGIN CONNECTION LIMIT 0"
check busy_server 75 "$tool" --dsn "user=idem_test_no_slots"
expect busy_server_says_so err_contains "too many connections"

db=$(newdb main)
as_role "$db" idem_sweeper
sweep_dsn=$role_dsn
records "$db" due- 7 completed "-1 hour" "+1 day"
records "$db" kept- 3 completed "+1 hour" "+1 day"
records "$db" old- 2 expired "-1 day" "-1 day"
records "$db" pending- 2 pending "-1 day" "-1 day"

# --dry-run counts, changes nothing, and writes no metrics.
before=$(digest "$db")
check dry_run 0 "$tool" --dsn "$sweep_dsn" --dry-run --json --metrics-file "$scratch/dry.prom"
expect dry_run_counts json_ok 'd["dry_run"] and d["expired"] == 7 and d["purged"] == 2'
expect dry_run_changes_nothing test "$(digest "$db")" = "$before"
expect dry_run_no_metrics test ! -e "$scratch/dry.prom"
# Without --json or -v a dry run still says what is due, and that it wrote no metrics.
check dry_run_says 0 "$tool" --dsn "$sweep_dsn" --dry-run --metrics-file "$scratch/dry.prom"
expect dry_run_says_due contains "dry run: 7 records due to expire, 2 tombstones due to purge; nothing was changed, no metrics file written"
expect dry_run_says_no_metrics test ! -e "$scratch/dry.prom"

# Several hosts, the first silent: it gets its connect timeout, then the next answers (as
# libpq's blocking connect does).
silent_listener
check silent_first_host 0 timeout 60 "$tool" --dsn "host=127.0.0.1,127.0.0.1 port=$silent_port,$PGPORT dbname=$db user=$role_user" --connect-timeout 2 --dry-run
silent_stop

# A run is silent on success; the PG* environment is used without --dsn.
check run_silent 0 env PGDATABASE="$db" PGUSER="$role_user" "$tool"
expect run_silent_stdout test -z "$out"
expect run_silent_stderr test -z "$err"
expect run_expired test "$(count "$db" expired)" = 7
expect run_purged test "$(q "$db" "SELECT count(*) FROM idem.operations WHERE operation_id LIKE 'old-%'")" = 0
expect run_pending_untouched test "$(count "$db" pending)" = 2
expect run_kept test "$(count "$db" completed)" = 3

# --verbose narrates on stderr; --json prints the summary on stdout.
records "$db" more- 4 completed "-1 minute" "+1 day"
check verbose 0 "$tool" --dsn "$sweep_dsn" --verbose --json
expect verbose_narrates err_contains "expired: 4 in batch 1"
expect json_summary json_ok 'd["expired"] == 4 and d["purged"] == 0 and d["complete"] and not d["locked_out"] and d["duration_seconds"] >= 0'

# --metrics-file: Prometheus text format, written by rename (no temporary file left).
q "$db" "INSERT INTO idem.reconciliation_items (tenant, operation_id, kind, tool, fingerprint, count)
         VALUES ('acme', 'due-1', 'expired', 't', sha256('x'), 3)"
records "$db" m- 5 completed "-1 minute" "+1 day"
check metrics 0 "$tool" --dsn "$sweep_dsn" --metrics-file "$scratch/idem.prom"
expect metrics_written test -s "$scratch/idem.prom"
expect metrics_no_temporary test "$(ls "$scratch" | grep -c 'idem.prom.tmp')" = 0
expect metrics_parse python3 - "$scratch/idem.prom" <<'PY'
import re, sys, time
# The text exposition format: HELP and TYPE lines, then samples "name value".
name = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
value = r"[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|NaN|[-+]?Inf)"
seen, typed = {}, {}
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
assert lines[-1] == "", "ends with a newline"
for line in lines[:-1]:
    if m := re.fullmatch(rf"# HELP ({name}) (.+)", line):
        continue
    if m := re.fullmatch(rf"# TYPE ({name}) (counter|gauge|histogram|summary|untyped)", line):
        assert m[1] not in typed, f"TYPE twice: {line}"
        typed[m[1]] = m[2]
        continue
    m = re.fullmatch(rf"({name})(\{{kind=\"[a-z_]+\"\}})? ({value})", line)
    assert m, f"not a sample: {line!r}"
    assert m[1] in typed, f"sample before its TYPE: {line}"
    key = m[1] + (m[2] or "")
    assert key not in seen, f"sample twice: {line}"
    seen[key] = float(m[3])
assert seen["idem_sweep_expired_rows"] == 5, seen
assert seen["idem_sweep_purged_tombstones"] == 0, seen
# A running total is a counter, named _total; the open items are one gauge by kind, every
# kind idem records present (0 for none).
assert typed["idem_late_retries_recorded_total"] == "counter", typed
assert seen["idem_late_retries_recorded_total"] == 3, seen
assert typed["idem_reconciliation_items_open"] == "gauge", typed
assert seen['idem_reconciliation_items_open{kind="expired"}'] == 1, seen
for kind in ("stalled_pending", "outcome_unknown", "lease_lost", "outbox_exhausted", "intent"):
    assert seen[f'idem_reconciliation_items_open{{kind="{kind}"}}'] == 0, seen
assert seen["idem_sweep_duration_seconds"] >= 0, seen
assert abs(seen["idem_sweep_last_success_timestamp_seconds"] - time.time()) < 600, seen
PY
# A metrics file that cannot be written is refused before any work: nothing is swept.
records "$db" unwritable- 2 completed "-1 minute" "+1 day"
before=$(digest "$db")
check metrics_unwritable 74 "$tool" --dsn "$sweep_dsn" --metrics-file "$scratch/no/such/dir/x.prom"
expect metrics_unwritable_says_so err_contains "cannot write the metrics file .*; nothing was swept"
expect metrics_unwritable_swept_nothing test "$(digest "$db")" = "$before"
check metrics_unwritable_then_swept 0 "$tool" --dsn "$sweep_dsn" --json
expect metrics_unwritable_were_due json_ok 'd["expired"] == 2'


# A backlog larger than a run's limit is worked off across runs.
records "$db" backlog- 25 completed "-1 hour" "+1 day"
check backlog_first 0 "$tool" --dsn "$sweep_dsn" --batch 10 --max-batches 2 --json
expect backlog_first_partial json_ok 'd["expired"] == 20 and not d["complete"]'
check backlog_second 0 "$tool" --dsn "$sweep_dsn" --batch 10 --json
expect backlog_second_rest json_ok 'd["expired"] == 5 and d["complete"]'

# Another sweep holds the lock: exit 0 at once; silent unless --verbose.
records "$db" locked- 3 completed "-1 hour" "+1 day"
hold_lock "$db" 7594306392416544112
check locked_silent 0 "$tool" --dsn "$sweep_dsn"
expect locked_silent_stderr test -z "$err"
check locked_verbose 0 "$tool" --dsn "$sweep_dsn" --verbose
expect locked_verbose_says_so err_contains "another sweep"
check locked_json 0 "$tool" --dsn "$sweep_dsn" --json
expect locked_json_says_so json_ok 'd["locked_out"] and d["expired"] == 0'
expect locked_changed_nothing test "$(q "$db" "SELECT count(*) FROM idem.operations WHERE operation_id LIKE 'locked-%' AND state = 'completed'")" = 3
release_lock

# A table lock held past --lock-timeout (a migration, say): 75, the next run retries;
# --dry-run's count too.
hold_table_lock "$db" idem.operations
check table_locked_dry_run 75 "$tool" --dsn "$sweep_dsn" --dry-run --lock-timeout 1
expect table_locked_dry_run_says_so err_contains "lock timeout"
check table_locked 75 "$tool" --dsn "$sweep_dsn" --lock-timeout 1
release_lock

# A statement the server fails for want of its resources (disk full, out of memory, too
# many connections: class 53) or with 57P05 is "unavailable" (75), as the library answers
# it: nothing is changed.
db=$(newdb resources)
as_role "$db" idem_sweeper
sweep_dsn=$role_dsn
records "$db" r- 2 completed "-1 hour" "+1 day"
for state in 53000 53100 53200 53300 57P05; do
    fail_updates "$db" idem.operations "$state"
    check "resources_$state" 75 "$tool" --dsn "$sweep_dsn"
    expect "resources_${state}_says_so" err_contains "failed by the test"
done
expect resources_changed_nothing test "$(count "$db" completed)" = 2
# A serialization failure or deadlock is still 75.
fail_updates "$db" idem.operations 40P01
check resources_deadlock 75 "$tool" --dsn "$sweep_dsn"

# Two sweepers at once: both exit 0, and the backlog is worked once.
db=$(newdb race)
as_role "$db" idem_sweeper
sweep_dsn=$role_dsn
records "$db" r- 6000 completed "-1 hour" "+1 day"
"$tool" --dsn "$sweep_dsn" --batch 100 --json >"$scratch/race1" 2>&1 &
p1=$!
"$tool" --dsn "$sweep_dsn" --batch 100 --json >"$scratch/race2" 2>&1 &
p2=$!
wait "$p1"; s1=$?
wait "$p2"; s2=$?
expect race_first_exit_0 test "$s1" = 0
expect race_second_exit_0 test "$s2" = 0
expect race_all_expired test "$(count "$db" expired)" = 6000
expect race_counted_once python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); assert a["expired"]+b["expired"] == 6000, (a,b)' "$scratch/race1" "$scratch/race2"

# Through PgBouncer in transaction mode (tools/with-postgres --pgbouncer): refused, saying
# to connect directly, with nothing changed and no lock left behind.
if [ -n "${IDEM_PGBOUNCER:-}" ]; then
    db=$(newdb pooler)
    as_role "$db" idem_sweeper
    sweep_dsn=$role_dsn
    records "$db" p- 3 completed "-1 hour" "+1 day"
    check pooler_refused 78 "$tool" --dsn "$IDEM_PGBOUNCER dbname=$db user=$role_user"
    expect pooler_says_connect_directly err_contains "connect to the PostgreSQL server directly"
    expect pooler_changed_nothing test "$(count "$db" completed)" = 3
    expect pooler_no_lock_left test "$(q "$db" "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")" = 0
else
    echo "no PgBouncer (run under tools/with-postgres --pgbouncer): pooler checks not run" >&2
fi

# Row-level security: a role that would see no tenant's rows is refused before it sweeps
# nothing; a member of idem_sweeper sweeps every tenant.
db=$(newdb roles)
as_role "$db" idem_sweeper
sweep_dsn=$role_dsn
login_role idem_test_app idem_app
login_role idem_test_sweeper idem_sweeper
records "$db" r- 4 completed "-1 hour" "+1 day"
q "$db" "UPDATE idem.operations SET tenant = 'other' WHERE operation_id IN ('r-1', 'r-2')"
check app_role_refused 77 "$tool" --dsn "dbname=$db user=idem_test_app"
expect app_role_names_grant err_contains "GRANT idem_sweeper TO idem_test_app"
expect app_role_changed_nothing test "$(count "$db" completed)" = 4
check sweeper_role 0 "$tool" --dsn "dbname=$db user=idem_test_sweeper" --json
expect sweeper_role_every_tenant json_ok 'd["expired"] == 4'
expect sweeper_role_tombstones test "$(count "$db" expired)" = 4

# A role that may not use schema idem (outside idem_sweeper, or a member that does not
# inherit its rights) is refused as a configuration error, with the GRANT to run.
create_role idem_test_nobody LOGIN
create_role idem_test_noinherit_sweeper "LOGIN NOINHERIT IN ROLE idem_sweeper"
check no_usage_role 77 "$tool" --dsn "dbname=$db user=idem_test_nobody"
expect no_usage_role_names_grant err_contains "GRANT idem_sweeper TO idem_test_nobody"
check noinherit_role 77 "$tool" --dsn "dbname=$db user=idem_test_noinherit_sweeper"
expect noinherit_role_names_grant err_contains "GRANT idem_sweeper TO idem_test_noinherit_sweeper"
expect noinherit_role_says_inherit err_contains "ALTER ROLE idem_test_noinherit_sweeper INHERIT"

# A schema without migration 0003: exit 1, saying what to do. As the superuser: idem's
# roles get their grants only from migration 0007 on.
db=$(newdb old 2)
check old_schema 7 "$tool" --dsn "dbname=$db"
expect old_schema_says_migrate err_contains "idem-migrate up"

finish
