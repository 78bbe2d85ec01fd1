#!/usr/bin/env bash
# test-idem-migrate.sh IDEM-MIGRATE DATA-DIR: the idem-migrate program's commands, output
# and exit codes, against the server of tools/with-postgres (each case in a fresh database).
set -uo pipefail
tool=$1 data=$2 prefix=mt
. "$(dirname "$0")/common.sh"

# --help documents the exit codes (tests/tools/test-help-version.sh checks them against
# the table of tools/README.md); --version names the schema version.
check help 0 "$tool" --help
expect help_lists_exit_codes contains "Exit status:"
expect help_lists_drift_code contains "4  drift"
expect help_lists_no_schema_code contains "7  verify: the schema is not installed"
check version 0 "$tool" --version
expect version_names_schema contains "schema version"
check usage_no_command 64 "$tool"
check usage_bad_command 64 "$tool" frobnicate
check usage_bad_option 64 "$tool" --frob status
check usage_bad_to 64 "$tool" --to x up
check no_server 75 "$tool" --dsn "host=/nonexistent port=1" status

# connect_timeout by libpq's rules: a value that is not a whole number is refused at once
# (not taken for "no limit", which hung on a server that never answers); zero or negative
# waits indefinitely (not "expired at once").
silent_listener
check timeout_garbage 78 timeout 30 "$tool" status --dsn "host=127.0.0.1 port=$silent_port connect_timeout=abc"
expect timeout_garbage_says_so err_contains 'invalid integer value "abc" for connection option "connect_timeout"'
check timeout_garbage_env 78 env PGCONNECT_TIMEOUT=abc timeout 30 "$tool" status --dsn "host=127.0.0.1 port=$silent_port"
check timeout_expires 75 timeout 30 "$tool" status --dsn "host=127.0.0.1 port=$silent_port connect_timeout=1"
expect timeout_expires_says_so err_contains "timeout expired"
# --connect-timeout, as the other tools take it.
check timeout_option 75 timeout 30 "$tool" status --dsn "host=127.0.0.1 port=$silent_port" --connect-timeout 1
expect timeout_option_says_so err_contains "timeout expired"
check usage_timeout_option 64 "$tool" status --connect-timeout 0
expect usage_timeout_option_says_so err_contains "--connect-timeout: '0' is not a number of seconds"
silent_stop
db=$(emptydb timeout)
check timeout_negative_waits 3 env PGCONNECT_TIMEOUT=-5 "$tool" --dsn "dbname=$db" status
check timeout_spaces 3 "$tool" --dsn "dbname=$db connect_timeout=' 3 '" status

# Fresh database: status pending (3), plan prints SQL and runs nothing, up, then clean.
db=$(emptydb fresh)
check verify_fresh 7 "$tool" --dsn "dbname=$db" verify
expect verify_fresh_says_not_installed err_contains "schema is not installed"
expect verify_fresh_says_run_up err_contains "run idem-migrate up"
check status_fresh 3 "$tool" --dsn "dbname=$db" status
expect status_fresh_lists_pending contains "0001_operations.sql"
expect status_fresh_says_run_up contains "pending: run idem-migrate up"
expect status_fresh_up_would_not_refuse lacks "up would refuse"
check status_fresh_json 3 "$tool" --dsn "dbname=$db" status --json
expect status_fresh_json_no_refusal python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["up_would_refuse"] is None and not d["ledger"]' "$out"
latest=$("$tool" --version | sed -n 's/.*schema version \([0-9]*\).*/\1/p')
# The newest migration that creates something (0018); 0009 only grants, which up may run
# again, so a ledger that lost its row leaves it pending rather than unrecorded.
newest_creating=18
grant_only=9
check baseline_not_applied 9 "$tool" --dsn "dbname=$db" baseline --to "$latest"
expect baseline_not_applied_says_why err_contains "0001_operations.sql is not applied"
expect baseline_not_applied_records_nothing test "$(q "$db" "SELECT to_regclass('idem.schema_migrations') IS NULL")" = t
check plan_fresh 0 "$tool" --dsn "dbname=$db" plan
expect plan_prints_sql contains "CREATE TABLE idem.operations"
expect plan_runs_nothing test "$(q "$db" "SELECT count(*) FROM pg_namespace WHERE nspname = 'idem'")" = 0
check up_fresh 0 "$tool" --dsn "dbname=$db" up
expect up_reports_applied contains "applied 0001_operations.sql"
check status_clean 0 "$tool" --dsn "dbname=$db" status
expect status_clean_says_up_to_date contains "up to date"
check status_json 0 "$tool" --dsn "dbname=$db" status --json
expect status_json_parses python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["up_to_date"] and d["pending"] == 0 and d["migrations"][0]["state"] == "applied"' "$out"
check up_again 0 "$tool" --dsn "postgresql:///$db" up
expect up_again_is_noop contains "nothing to apply"
check verify_clean 0 "$tool" --dsn "dbname=$db" verify
check verify_clean_json 0 "$tool" --dsn "dbname=$db" verify --json
expect verify_clean_json_parses json_ok 'd["verified"] and d["applied"] >= 9 and d["drifted"] == [] and d["unknown"] == []'
# --json is for the commands that print JSON: refused, not ignored, elsewhere.
check up_json_refused 64 "$tool" --dsn "dbname=$db" up --json
expect up_json_refused_says_so err_contains "--json is for status and verify"
check plan_json_refused 64 "$tool" --dsn "dbname=$db" plan --json
# A role that may not read the ledger is told what to grant.
create_role idem_mt_noaccess LOGIN
check status_no_access 77 "$tool" --dsn "dbname=$db user=idem_mt_noaccess" status
expect status_no_access_hint err_contains "permission denied for schema idem (hint: GRANT idem_operator TO idem_mt_noaccess"
# --to beyond the newest migration applies nothing and names the newest.
newest=$("$tool" --dsn "dbname=$db" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["migrations"][-1]["name"])')
for cmd in up plan baseline; do
    check "${cmd}_to_beyond" 64 "$tool" --dsn "dbname=$db" $cmd --to 9999
    expect "${cmd}_to_beyond_names_newest" err_contains "to_version: 9999 is beyond the newest migration, $newest"
done
check plan_up_to_date 0 "$tool" --dsn "dbname=$db" plan
expect plan_up_to_date_empty contains "0 migrations to apply"

# A gap in versions (idem's own 0002 was removed): up applies the rest in order.
db=$(emptydb gap)
check gap_up 0 "$tool" --dsn "dbname=$db" --dir "$data/migrations-gap" up
expect gap_applies_after_the_gap contains "applied 0003_three.sql"
check gap_status 0 "$tool" --dsn "dbname=$db" --dir "$data/migrations-gap" status
expect gap_status_up_to_date contains "up to date: 2 applied"

# A database migrated while the embedded set had 0002 (the example's table): that ledger
# row is listed, and the schema is up to date.
db=$(emptydb old0002)
check old0002_up 0 "$tool" --dsn "dbname=$db" up
q "$db" "INSERT INTO idem.schema_migrations (version, name, checksum, duration_ms) VALUES (2, '0002_example_support_tasks.sql', sha256('old'), 0)"
check old0002_status 0 "$tool" --dsn "dbname=$db" status
expect old0002_listed contains "0002_example_support_tasks.sql"
expect old0002_up_to_date contains "up to date"
check old0002_verify 0 "$tool" --dsn "dbname=$db" verify
check old0002_up_again 0 "$tool" --dsn "dbname=$db" up
expect old0002_nothing_to_apply contains "nothing to apply"

# The PG* environment is used without --dsn.
db=$(emptydb env)
check env_up 0 env PGDATABASE="$db" "$tool" -q up
expect env_up_quiet test -z "$out$err"
expect env_up_applied test "$(q "$db" "SELECT count(*) > 0 FROM idem.schema_migrations")" = t

# Two up processes at once: both exit 0, every version recorded once.
db=$(emptydb race)
"$tool" --dsn "dbname=$db" up >"$scratch/race1" 2>&1 &
p1=$!
"$tool" --dsn "dbname=$db" up >"$scratch/race2" 2>&1 &
p2=$!
wait "$p1"; s1=$?
wait "$p2"; s2=$?
expect race_first_exit_0 test "$s1" = 0
expect race_second_exit_0 test "$s2" = 0
expect race_each_version_once test "$(q "$db" "SELECT count(*) = count(DISTINCT version) AND count(*) > 0 FROM idem.schema_migrations")" = t
expect race_applied_once test "$(cat "$scratch/race1" "$scratch/race2" | grep -c '^applied 0001_operations.sql')" = 1

# A failing migration: exit 5, FILE:LINE on stderr, that file rolled back entirely.
db=$(emptydb fail)
check up_failing 5 "$tool" --dsn "dbname=$db" --dir "$data/migrations-syntax-error" up
expect failing_names_file_line err_contains "0002_broken.sql:7:"
expect failing_rolled_back test "$(q "$db" "SELECT to_regclass('idem.half_done') IS NULL AND (SELECT count(*) FROM idem.base) = 0")" = t
expect failing_ledger_unchanged test "$(q "$db" "SELECT string_agg(name, ',') FROM idem.schema_migrations")" = 0001_base.sql

# A server error with newlines, DETAIL and HINT is one line on stderr (a migration
# numbered past the applied one, in the same database).
mkdir "$scratch/multiline"
cat >"$scratch/multiline/0009_raise.sql" <<'SQL'
DO $$ BEGIN
  RAISE EXCEPTION E'first line\nsecond line'
    USING DETAIL = E'detail one\ndetail two', HINT = E'hint\tone';
END $$;
SQL
check multiline_up 5 "$tool" --dsn "dbname=$db" --dir "$scratch/multiline" -q up
expect multiline_one_line test -z "$out" -a "$(wc -l <<<"$err")" = 1
expect multiline_joined err_contains "0009_raise.sql:1: first line second line (detail one detail two) (hint: hint one)"

# A hint naming the roles script of the source tree (migration 0007's, when the roles are
# missing and the migrator may not create them) also names the installed one.
mkdir "$scratch/roles"
cat >"$scratch/roles/0010_roles.sql" <<'SQL'
DO $$ BEGIN
  RAISE EXCEPTION 'role "idem_app" does not exist' USING ERRCODE = '42501',
    HINT = 'A superuser runs tools/idem-roles.sql once per cluster, then idem-migrate up again.';
END $$;
SQL
check roles_hint_up 5 "$tool" --dsn "dbname=$db" --dir "$scratch/roles" -q up
expect roles_hint_installed err_contains "(installed: /"
expect roles_hint_share err_contains "/share/idem/idem-roles.sql)"

# A tampered applied migration: verify and status exit 4 naming it; up refuses with 4.
db=$(emptydb drift)
mkdir "$scratch/drift"
cp "$data/migrations-three/"*.sql "$scratch/drift/"
check drift_up 0 "$tool" --dsn "dbname=$db" --dir "$scratch/drift" up --to 2
echo "-- an edit" >>"$scratch/drift/0002_two.sql"
check drift_verify 4 "$tool" --dsn "dbname=$db" --dir "$scratch/drift" verify
expect drift_verify_names_file err_contains "0002_two.sql"
check drift_verify_json 4 "$tool" --dsn "dbname=$db" --dir "$scratch/drift" verify --json
expect drift_verify_json_names_it json_ok 'not d["verified"] and len(d["drifted"]) == 1 and d["drifted"][0]["applied_checksum"] != d["drifted"][0]["checksum"]'
check drift_status 4 "$tool" --dsn "dbname=$db" --dir "$scratch/drift" status
expect drift_status_says_up_refuses contains "up would refuse: 0002_two.sql: changed since it was applied"
expect drift_status_does_not_say_run_up lacks "run idem-migrate up"
check drift_plan 4 "$tool" --dsn "dbname=$db" --dir "$scratch/drift" plan
check drift_up_refused 4 "$tool" --dsn "dbname=$db" --dir "$scratch/drift" up
expect drift_nothing_applied test "$(q "$db" "SELECT count(*) FROM idem.schema_migrations")" = 2

# A pending file older than an applied one: status says why up refuses, and exits 4 as up
# does, instead of advising to run up.
db=$(emptydb order)
mkdir "$scratch/order"
cp "$data/migrations-three/0001_one.sql" "$data/migrations-three/0003_three.sql" "$scratch/order/"
check order_up 0 "$tool" --dsn "dbname=$db" --dir "$scratch/order" up
cp "$data/migrations-three/0002_two.sql" "$scratch/order/"
check order_status 4 "$tool" --dsn "dbname=$db" --dir "$scratch/order" status
expect order_status_says_why contains "up would refuse: 0002_two.sql is pending but the newer 0003_three.sql is already applied"
expect order_status_does_not_say_run_up lacks "run idem-migrate up"
check order_status_json 4 "$tool" --dsn "dbname=$db" --dir "$scratch/order" status --json
expect order_status_json_says_why python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert "0002_two.sql is pending" in d["up_would_refuse"] and not d["up_to_date"]' "$out"
check order_up_refused 4 "$tool" --dsn "dbname=$db" --dir "$scratch/order" up
check order_verify 0 "$tool" --dsn "dbname=$db" --dir "$scratch/order" verify

# The lock held past --lock-timeout by a session that is not idem-migrate: exit 6, and the
# message names that session (over TCP when tools/with-postgres gave an address).
db=$(emptydb locked)
hold_lock "${IDEM_PG_TCP:-} dbname=$db application_name=nightly-report" 7594306392314963826
holder_pid=$(q "$db" "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
check locked 75 "$tool" --dsn "dbname=$db" --lock-timeout 0 up
expect locked_names_pid err_contains "held by pid $holder_pid ("
expect locked_names_application err_contains 'application "nightly-report"'
expect locked_names_role err_contains "role \"$(q "$db" "SELECT current_user")\""
if [ -n "${IDEM_PG_TCP:-}" ]; then
    expect locked_names_client err_contains "client 127.0.0.1 port [0-9]"
fi
expect locked_does_not_blame_idem_migrate lacks "another idem-migrate"
release_lock

# Through PgBouncer in transaction mode (tools/with-postgres --pgbouncer): up refuses,
# saying to connect directly, and leaves no lock behind; status reads through it.
if [ -n "${IDEM_PGBOUNCER:-}" ]; then
    db=$(emptydb pooler)
    check pooler_up_refused 78 "$tool" --dsn "$IDEM_PGBOUNCER dbname=$db" up
    expect pooler_refusal_says_connect_directly err_contains "connect to the PostgreSQL server directly"
    expect pooler_up_applied_nothing test "$(q "$db" "SELECT to_regclass('idem.schema_migrations') IS NULL")" = t
    expect pooler_no_lock_left test "$(q "$db" "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")" = 0
    check pooler_direct_up 0 "$tool" --dsn "dbname=$db" -q up
    check pooler_status_reads 0 "$tool" --dsn "$IDEM_PGBOUNCER dbname=$db" status
else
    echo "no PgBouncer (run under tools/with-postgres --pgbouncer): pooler checks not run" >&2
fi

# A bad --dir: exit 66, naming the folder when it holds no migration.
check dir_missing 66 "$tool" --dir "$scratch/nonexistent" status
check dir_misnamed 66 "$tool" --dir "$data/migrations-misnamed" status
mkdir "$scratch/empty"
check dir_empty 66 "$tool" --dir "$scratch/empty" status
expect dir_empty_named err_contains "$scratch/empty: no migration files"
echo "notes" >"$scratch/empty/README"
check dir_without_migrations 66 "$tool" --dir "$scratch/empty" up
expect dir_without_migrations_not_up_to_date lacks "up to date"

# The ledger dropped while idem's tables stay: every command says so and exits 8, running
# nothing; baseline records what exists, and all is well again.
db=$(emptydb noledger)
check noledger_first_up 0 "$tool" --dsn "dbname=$db" up
q "$db" "DROP TABLE idem.schema_migrations"
check noledger_status 8 "$tool" --dsn "dbname=$db" status
expect noledger_status_says_missing contains "LEDGER MISSING"
expect noledger_status_names_remedy contains "baseline --to $newest_creating"
expect noledger_status_does_not_say_run_up lacks "run idem-migrate up"
check noledger_status_json 8 "$tool" --dsn "dbname=$db" status --json
expect noledger_status_json_says_so python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["ledger_incomplete"] and not d["ledger"] and d["unrecorded"] > 0 and "baseline" in d["up_would_refuse"]' "$out"
check noledger_plan 8 "$tool" --dsn "dbname=$db" plan
check noledger_verify 8 "$tool" --dsn "dbname=$db" verify
expect noledger_verify_says_missing err_contains "idem.schema_migrations is missing"
check noledger_up 8 "$tool" --dsn "dbname=$db" -q up
expect noledger_up_one_line test -z "$out" -a "$(wc -l <<<"$err")" = 1
expect noledger_up_no_raw_notice lacks "NOTICE"
expect noledger_up_ran_nothing test "$(q "$db" "SELECT to_regclass('idem.schema_migrations') IS NULL")" = t
check noledger_baseline_needs_to 64 "$tool" --dsn "dbname=$db" baseline
check noledger_baseline 0 "$tool" --dsn "dbname=$db" baseline --to "$latest"
expect noledger_baseline_says_recorded contains "recorded 0001_operations.sql as applied, without running it"
check noledger_status_after 0 "$tool" --dsn "dbname=$db" status
check noledger_verify_after 0 "$tool" --dsn "dbname=$db" verify

# One ledger row deleted: status names it (exit 8) instead of advising up; baseline
# restores it.
q "$db" "DELETE FROM idem.schema_migrations WHERE version = $newest_creating"
check norow_status 8 "$tool" --dsn "dbname=$db" status
expect norow_status_says_incomplete contains "LEDGER INCOMPLETE: 1 migration not recorded"
expect norow_status_lists_unrecorded contains "unrecorded"
expect norow_status_does_not_say_run_up lacks "run idem-migrate up"
check norow_up 8 "$tool" --dsn "dbname=$db" up
expect norow_up_names_remedy err_contains "baseline --to $newest_creating"
check norow_baseline 0 "$tool" --dsn "dbname=$db" baseline --to "$latest"
check norow_status_after 0 "$tool" --dsn "dbname=$db" status

# The row of the grant-only migration deleted while it was the newest applied: it is
# pending, and up runs it again (with the newer ones).
db=$(emptydb grantrow)
check grantrow_up_to 0 "$tool" --dsn "dbname=$db" -q up --to "$grant_only"
q "$db" "DELETE FROM idem.schema_migrations WHERE version = $grant_only"
check grantrow_status 3 "$tool" --dsn "dbname=$db" status
check grantrow_up 0 "$tool" --dsn "dbname=$db" up
expect grantrow_up_applied contains "applied 0009_ledger_read.sql"
check grantrow_status_after 0 "$tool" --dsn "dbname=$db" status

# Row-level security taken off a tenant table, then the ledger dropped: baseline refuses
# to record 0007 (exit 9), naming the table and what it lacks, and writes nothing.
db=$(emptydb norls)
check norls_up 0 "$tool" --dsn "dbname=$db" -q up
q "$db" "DROP POLICY tenant_isolation ON idem.operations"
q "$db" "ALTER TABLE idem.operations DISABLE ROW LEVEL SECURITY"
q "$db" "DROP TABLE idem.schema_migrations"
check norls_baseline 9 "$tool" --dsn "dbname=$db" baseline --to "$latest"
expect norls_names_migration err_contains "0007_row_security.sql is not applied"
expect norls_names_table_and_lack err_contains "idem.operations, whose tenants it isolates, has row-level security disabled and no policy tenant_isolation"
expect norls_names_remedy err_contains "SELECT idem.isolate_tenants('idem.operations');"
expect norls_records_nothing test "$(q "$db" "SELECT to_regclass('idem.schema_migrations') IS NULL")" = t
check norls_verify 8 "$tool" --dsn "dbname=$db" verify
q "$db" "SELECT idem.isolate_tenants('idem.operations')"
check norls_baseline_restored 0 "$tool" --dsn "dbname=$db" baseline --to "$latest"
check norls_verify_restored 0 "$tool" --dsn "dbname=$db" verify

# A file starting with a UTF-8 byte order mark runs; its checksum is the file's. A
# pending file whose object already exists: exit 5, saying the ledger may lack it.
db=$(emptydb exists)
mkdir "$scratch/exists"
printf '\xef\xbb\xbfCREATE TABLE idem.a (id int);\n' >"$scratch/exists/0001_a.sql"
check bom_up 0 "$tool" --dsn "dbname=$db" --dir "$scratch/exists" up
expect bom_checksum_is_the_files test "$(q "$db" "SELECT encode(checksum, 'hex') FROM idem.schema_migrations")" = "$(sha256sum "$scratch/exists/0001_a.sql" | cut -d' ' -f1)"
printf 'CREATE TABLE idem.b (id int);\nCREATE TABLE idem.c (id int);\n' >"$scratch/exists/0002_bc.sql"
q "$db" "CREATE TABLE idem.c (id int)"
check exists_up 5 "$tool" --dsn "dbname=$db" --dir "$scratch/exists" -q up
expect exists_says_ledger_lacks_it err_contains "does not record 0002_bc.sql"
expect exists_names_remedy err_contains "baseline --to 2"

# The server's notices (and a warning as the connection starts) never reach stderr raw:
# hidden, or with --verbose one line each.
db=$(emptydb notices)
q "$db" "CREATE SCHEMA idem"
q "$db" "CREATE TEXT SEARCH CONFIGURATION public.gone (COPY = english)"
q "$db" "ALTER DATABASE \"$db\" SET default_text_search_config = 'public.gone'"
q "$db" "DROP TEXT SEARCH CONFIGURATION public.gone"
check notices_status 3 "$tool" --dsn "dbname=$db" status
expect notices_connect_warning_hidden lacks "WARNING"
check notices_up 0 "$tool" --dsn "dbname=$db" -q up
expect notices_hidden test -z "$out$err"
q "$db" "DROP TABLE idem.schema_migrations"
q "$db" "DROP SCHEMA idem CASCADE; CREATE SCHEMA idem"
check notices_verbose 0 "$tool" --dsn "dbname=$db" -q -v up
expect notices_verbose_shows_connect_warning err_contains '^idem-migrate: WARNING:  invalid value for parameter "default_text_search_config": "public.gone"$'
expect notices_verbose_shows_notice err_contains '^idem-migrate: NOTICE:  schema "idem" already exists, skipping$'
expect notices_verbose_every_line_prefixed test -z "$out" -a "$(grep -vc '^idem-migrate: ' <<<"$err")" = 0

# The distribution step on plain PostgreSQL: refused (exit 10), naming the fix; nothing
# changes; status says there is nothing to distribute and lists every tenant table.
db=$(emptydb citus)
check distribute_up 0 "$tool" --dsn "dbname=$db" -q up
check distribute_without_citus 10 "$tool" --dsn "dbname=$db" distribute
expect distribute_names_the_fix err_contains "CREATE EXTENSION citus"
check distribute_bad_table 69 "$tool" --dsn "dbname=$db" distribute --table nodot
expect distribute_bad_table_named err_contains '"nodot"'
check distribute_status_json 0 "$tool" --dsn "dbname=$db" status --json
expect distribute_status_json_says_local python3 -c '
import json, sys
c = json.loads(sys.argv[1])["citus"]
assert c["installed"] is False and c["distributed"] is False, c
tenant = {t["name"] for t in c["tables"] if t["tenant"]}
assert {"idem.operations", "idem.intents", "idem.outbox"} <= tenant, tenant
assert all(t["placement"] == "local" for t in c["tables"]), c
' "$out"
check distribute_status 0 "$tool" --dsn "dbname=$db" status
expect distribute_status_says_not_installed contains "Citus: not installed"

# A password in the DSN never appears in any output, text or JSON, whatever fails.
for dsn in 'postgresql://u:s3cr3tpw@[::1/db' 'host=/nonexistent user=u password=s3cr3tpw dbname=x' \
    "postgresql://u:s3cr3tpw@/nonexistentdb?host=${PGHOST:-/tmp}"; do
    for cmd in status "status --json" verify up plan; do
        n=$((n + 1))
        out=$("$tool" $cmd --dsn "$dsn" 2>&1)
        case "$out" in
        *s3cr3tpw*)
            echo "FAIL: password shown by '$cmd' for $dsn: $out" >&2
            failures=$((failures + 1))
            ;;
        esac
    done
done

finish
