#!/usr/bin/env bash
# test-idem-reconcile.sh IDEM-RECONCILE IDEM-MIGRATE: list, show and resolve round trip,
# filters, output formats and exit codes, against the server of tools/with-postgres.
set -uo pipefail
tool=$1 migrate=$2 prefix=rt
. "$(dirname "$0")/common.sh"

# item DB TENANT OPERATION_ID KIND COUNT SEEN_IN: one open reconciliation item.
item() {
    q "$1" "INSERT INTO idem.reconciliation_items (tenant, operation_id, kind, tool, fingerprint,
        fingerprint_matches, count, first_seen, last_seen)
        VALUES ('$2', '$3', '$4', 'create_support_task', sha256('$3'), true, $5,
        now() + interval '$6' - interval '1 day', now() + interval '$6')"
}

check help 0 "$tool" --help
expect help_lists_exit_codes contains "75  try again later"
check version 0 "$tool" --version
check usage_no_command 64 "$tool"
check usage_bad_command 64 "$tool" frobnicate
check usage_list_operand 64 "$tool" list acme
check usage_show_operands 64 "$tool" show acme
check usage_resolve_note 64 "$tool" resolve acme op-1
check usage_since 64 "$tool" list --since yesterday
check usage_limit 64 "$tool" list --limit -3
check usage_tenant_for_show 64 "$tool" show acme op-1 --tenant acme
check usage_note_for_list 64 "$tool" list --note x
check usage_open_and_resolved 64 "$tool" list --open --resolved
expect usage_open_and_resolved_names_both err_contains "--open and --resolved"
check usage_resolved_and_open 64 "$tool" list --resolved --open
check usage_since_no_such_day 64 "$tool" list --since 2024-02-31
expect usage_since_no_such_day_says_so err_contains "not a day of the calendar"
check usage_since_not_leap 64 "$tool" list --since 2023-02-29T10:00:00Z
check usage_since_april_31 64 "$tool" list --since 2024-04-31
# A leap second on the last day of 9999 would roll over into the year 10000.
check usage_since_year_10000 64 "$tool" list --since 9999-12-31T23:59:60
check no_server 75 "$tool" --dsn "host=/nonexistent port=1" list
expect no_server_one_line test "$(wc -l <<<"$err")" = 1

# Connection settings that cannot work are an error (1), not "unavailable" (75).
check dsn_unknown_key 78 "$tool" --dsn "nokey=1" list
check dsn_missing_equals 78 "$tool" --dsn "host=x missing" list
check dsn_bad_sslmode 78 "$tool" --dsn "sslmode=bogus" list
check dsn_bad_connect_timeout 78 "$tool" --dsn "connect_timeout=abc" list
check no_such_database 78 "$tool" --dsn "dbname=idem_no_such_database" list
check no_such_role 78 "$tool" --dsn "user=idem_no_such_role" list
check dsn_bad_port 78 "$tool" --dsn "port=notaport" list
# Through PgBouncer, which passes the server's refusal on (and leaves PQping() without an
# answer): a role it knows that the server does not have, a database the server does not
# have, a role it does not know itself. Names of this run's own, so that no other test
# meets the same PgBouncer pool, which after a failed server login makes clients wait.
if [ -n "${IDEM_PGBOUNCER:-}" ]; then
    ghost_db=$(newdb ghost)
    check pooler_no_such_role 78 "$tool" --dsn "$IDEM_PGBOUNCER dbname=$ghost_db user=idem_test_ghost" list
    expect pooler_no_such_role_says_so err_contains 'role "idem_test_ghost" does not exist'
    check pooler_no_such_database 78 "$tool" --dsn "$IDEM_PGBOUNCER dbname=${ghost_db}_none" list
    check pooler_unknown_role 78 "$tool" --dsn "$IDEM_PGBOUNCER dbname=$ghost_db user=idem_no_such_role" list
fi

db=$(newdb main)
as_role "$db" idem_operator
op_dsn=$role_dsn
q "$db" "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,
    state, claim_token, completed_at, expires_at, forget_at, expired_at)
    VALUES ('acme', 'op-1', 'create_support_task', 1, sha256('op-1'), 'expired',
    gen_random_uuid(), now() - interval '8 days', now() + interval '20 days',
    now() + interval '20 days', now() - interval '1 day')"
item "$db" acme op-1 expired 3 "-1 minute"
item "$db" acme op-2 expired 1 "-3 hours"
item "$db" globex op-1 expired 1 "-2 days"

# An empty filter result is no error.
check list_none 0 "$tool" --dsn "$op_dsn" list --tenant initech
expect list_none_says_so contains "0 items"

# The table, most recently seen first; the PG* environment is used without --dsn.
check list 0 env PGDATABASE="$db" PGUSER="$role_user" "$tool" list
expect list_header contains "OPERATION ID"
expect list_rows test "$(grep -c ' expired ' <<<"$out")" = 3
expect list_newest_first test "$(sed -n 2p <<<"$out" | awk '{print $1, $2}')" = "acme op-1"
expect list_summary contains "3 items, 3 open"
check list_tenant 0 "$tool" --dsn "$op_dsn" list --tenant globex
expect list_tenant_only_globex test "$(grep -c '^acme' <<<"$out")" = 0
expect list_tenant_has_globex contains "^globex *op-1"
check list_since 0 "$tool" --dsn "$op_dsn" list --since 1h
expect list_since_one contains "1 item, 1 open"
check list_since_leap_day 0 "$tool" --dsn "$op_dsn" list --since 2024-02-29
check list_open_twice 0 "$tool" --dsn "$op_dsn" list --open --open
check list_json 0 "$tool" --dsn "$op_dsn" list --json --kind expired
expect list_json_parses json_ok 'd["count"] == 3 and d["items"][0]["count"] == 3 and d["items"][0]["open"] and d["items"][0]["fingerprint_matches"] is True'

# show: the tombstone and every item of the key, this tenant only.
check show 0 "$tool" --dsn "$op_dsn" show acme op-1
expect show_tombstone contains "tombstone: state expired"
expect show_item contains "expired: 3 requests"
expect show_item_compared_with_tombstone contains "fingerprint [0-9a-f]* matches the tombstone: yes"
check show_json 0 "$tool" --dsn "$op_dsn" show acme op-1 --json
expect show_json_parses json_ok 'd["record"]["state"] == "expired" and d["record"]["receipt"] is None and len(d["items"]) == 1'
check show_forgotten 0 "$tool" --dsn "$op_dsn" show acme op-2
expect show_forgotten_says_so contains "forgotten"
# No record, no tombstone: nothing was compared, and show does not say it was.
expect show_forgotten_compares_nothing contains "the key is forgotten: nothing to compare it with"
expect show_forgotten_no_tombstone_named lacks "matches the tombstone"
# A live record (an item of another kind) is a record, not a tombstone; a key memory
# shorter than the record's retention remembers the key until the record expires.
q "$db" "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,
    state, claim_token, created_at, completed_at, response, expires_at, forget_at)
    VALUES ('acme', 'op-3', 'create_support_task', 1, sha256('op-3'), 'completed',
    gen_random_uuid(), '2030-01-01 00:00:00+00', '2030-01-01 00:00:01+00', '{}',
    '2030-01-08 00:00:00+00', '2030-01-02 00:00:00+00')"
item "$db" acme op-3 stalled_pending 1 "-1 minute"
check show_live 0 "$tool" --dsn "$op_dsn" show acme op-3
expect show_live_compared_with_record contains "matches the record: yes"
expect show_live_no_tombstone lacks "tombstone"
expect show_live_remembered_to_expiry contains "remembered to  2030-01-08 00:00:00 UTC"
q "$db" "DELETE FROM idem.reconciliation_items WHERE operation_id = 'op-3';
    DELETE FROM idem.operations WHERE operation_id = 'op-3'"
# A kind idem never records finds nothing: refused as the typo it is.
check list_unknown_kind 64 "$tool" --dsn "$op_dsn" list --kind nonsense
expect list_unknown_kind_says_so err_contains 'filter.kind: "nonsense" is not a kind of item idem records'
check resolve_unknown_kind 64 "$tool" --dsn "$op_dsn" resolve acme op-1 --kind nonsense --note x
expect resolve_unknown_kind_says_so err_contains "resolution.kind"
check show_unknown 2 "$tool" --dsn "$op_dsn" show acme op-9
check show_bad_tenant 64 "$tool" --dsn "$op_dsn" show 'acme corp' op-1
expect show_bad_tenant_names_field err_contains "tenant"

# resolve: records the note, who (the role, or --by) and when; only that key and tenant.
check resolve 0 "$tool" --dsn "$op_dsn" resolve acme op-1 --note "customer told: ran once"
expect resolve_says_one contains "resolved 1 item"
check resolve_again 2 "$tool" --dsn "$op_dsn" resolve acme op-1 --note again
expect resolve_again_says_resolved err_contains "already resolved"
check resolve_by 0 "$tool" --dsn "$op_dsn" resolve globex op-1 --by "Alice Ops" --note "n/a" --json
expect resolve_by_json json_ok 'd["resolved"] == 1'
check list_resolved 0 "$tool" --dsn "$op_dsn" list --resolved --json
expect list_resolved_two json_ok 'len(d["items"]) == 2 and {i["resolved_by"] for i in d["items"]} == {"Alice Ops", "'"$role_user"'"} and any(i["note"] == "customer told: ran once" for i in d["items"])'
check list_open 0 "$tool" --dsn "$op_dsn" list --open
expect list_open_one contains "1 item, 1 open"
expect list_open_is_op2 contains "^acme *op-2"
check resolve_bad_note 64 "$tool" --dsn "$op_dsn" resolve acme op-2 --note ""
expect resolve_bad_note_names_field err_contains "note"
check resolve_bad_kind 64 "$tool" --dsn "$op_dsn" resolve acme op-2 --kind Bad --note x

# Row-level security: the application's role is refused (it would list nothing); a member
# of idem_operator lists every tenant's items.
login_role idem_test_app idem_app
login_role idem_test_operator idem_operator
check app_role_refused 77 "$tool" --dsn "dbname=$db user=idem_test_app" list
expect app_role_names_grant err_contains "GRANT idem_operator TO idem_test_app"
q "$db" "INSERT INTO idem.reconciliation_items (tenant, operation_id, kind, tool, fingerprint)
    VALUES ('other', 'op-o', 'expired', 't', '\\x00')"
total=$(q "$db" "SELECT count(*) FROM idem.reconciliation_items")
check operator_role 0 "$tool" --dsn "dbname=$db user=idem_test_operator" list --json
expect operator_role_lists_all json_ok "d['count'] == $total and 'other' in {i['tenant'] for i in d['items']}"

# A role that may not use schema idem (outside idem_operator, or a member that does not
# inherit its rights) is refused as a configuration error, with the GRANT to run.
create_role idem_test_nobody LOGIN
create_role idem_test_noinherit_operator "LOGIN NOINHERIT IN ROLE idem_operator"
check no_usage_role 77 "$tool" --dsn "dbname=$db user=idem_test_nobody" list
expect no_usage_role_names_grant err_contains "GRANT idem_operator TO idem_test_nobody"
check noinherit_role 77 "$tool" --dsn "dbname=$db user=idem_test_noinherit_operator" list
expect noinherit_role_names_grant err_contains "GRANT idem_operator TO idem_test_noinherit_operator"

# A statement the server fails for want of its resources (class 53) or with 57P05 is
# "unavailable" (75), as the library answers it; so are a lost connection's and a
# deadlock's SQLSTATE.
db=$(newdb resources)
as_role "$db" idem_operator
op_dsn=$role_dsn
item "$db" acme op-1 expired 1 "-1 minute"
for state in 53000 53100 53200 53300 57P05; do
    fail_updates "$db" idem.reconciliation_items "$state"
    check "resources_$state" 75 "$tool" --dsn "$op_dsn" resolve acme op-1 --note x
    expect "resources_${state}_says_so" err_contains "failed by the test"
done
for state in 40P01 08006; do
    fail_updates "$db" idem.reconciliation_items "$state"
    check "transient_$state" 75 "$tool" --dsn "$op_dsn" resolve acme op-1 --note x
done
expect resources_changed_nothing test "$(q "$db" "SELECT count(*) FROM idem.reconciliation_items WHERE resolved_at IS NULL")" = 1

# The table keeps its columns whatever the kind: outcome_unknown and outbox_exhausted
# fit theirs.
db=$(newdb layout)
as_role "$db" idem_operator
op_dsn=$role_dsn
item "$db" acme op-1 expired 1 "-1 minute"
item "$db" acme op-2 outcome_unknown 1 "-2 minutes"
item "$db" acme op-3 outbox_exhausted 1 "-3 minutes"
check list_layout 0 "$tool" --dsn "$op_dsn" list
expect list_layout_aligned python3 -c '
import sys
header, *rows = sys.argv[1].splitlines()[:-1]
assert len(rows) == 3, rows
for word, value in (("TOOL", "create_support_task "), ("MATCHES", "yes "), ("FIRST SEEN", "20")):
    at = header.index(word)
    for row in rows:
        assert row[at:].startswith(value), (word, header, row)
' "$out"

# A schema without migration 0003: exit 1, saying what to do. As the superuser: idem's
# roles get their grants only from migration 0007 on.
db=$(newdb old 2)
check old_schema 7 "$tool" --dsn "dbname=$db" list
expect old_schema_says_migrate err_contains "idem-migrate up"

finish
