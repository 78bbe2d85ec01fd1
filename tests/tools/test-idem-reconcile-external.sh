#!/usr/bin/env bash
# test-idem-reconcile-external.sh IDEM-RECONCILE IDEM-MIGRATE: external operations in
# idem-reconcile: list and show an outcome_unknown operation with its attempt history, and
# resolve it with --as, against the server of tools/with-postgres.
set -uo pipefail
tool=$1 migrate=$2 prefix=rx
. "$(dirname "$0")/common.sh"

# unknown DB TENANT OPERATION_ID: an external operation whose second attempt's result is not
# known, as the library leaves it (record, two attempts, an open item).
unknown() {
    q "$1" "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version,
        fingerprint, state, claim_token, expires_at, forget_at, downstream_key, attempts)
        VALUES ('$2', '$3', 'send_email', 1, sha256('$3'), 'outcome_unknown',
        gen_random_uuid(), now() + interval '7 days', now() + interval '30 days',
        'key-$3', 2);
        INSERT INTO idem.external_attempts (tenant, operation_id, attempt, started_at,
        ended_at, outcome, error) VALUES
        ('$2', '$3', 1, now() - interval '5 minutes', now() - interval '4 minutes',
         'lease_expired', NULL),
        ('$2', '$3', 2, now() - interval '3 minutes', now() - interval '2 minutes', 'unknown',
         'no reply within 10 s');
        INSERT INTO idem.reconciliation_items (tenant, operation_id, kind, tool, fingerprint,
        fingerprint_matches) VALUES ('$2', '$3', 'outcome_unknown', 'send_email', sha256('$3'),
        true)" >/dev/null
}

check help_explains 0 "$tool" --help
expect help_explains_unknown contains "outcome_unknown"
expect help_lists_as contains "--as OUTCOME"
check usage_as_value 64 "$tool" resolve acme op-1 --as maybe --note x
check usage_as_for_resolve 64 "$tool" list --as completed
check usage_reference_needs_as 64 "$tool" resolve acme op-1 --reference r --note x
check usage_as_with_kind 64 "$tool" resolve acme op-1 --as failed --kind expired --note x

# The rows are written as the superuser; idem-reconcile runs as idem_operator alone.
db=$(newdb main)
as_role "$db" idem_operator
op_dsn=$role_dsn
unknown "$db" acme op-1
unknown "$db" acme op-2
unknown "$db" globex op-1

check list_unknown 0 "$tool" --dsn "$op_dsn" list --kind outcome_unknown --open
expect list_unknown_three contains "3 items, 3 open"

check show 0 "$tool" --dsn "$op_dsn" show acme op-1
expect show_state contains "record: state outcome_unknown"
expect show_downstream_key contains "downstream key key-op-1"
expect show_attempts contains "attempts: 2"
expect show_lapsed_attempt contains "1: started .*, lease_expired at"
expect show_unknown_attempt contains "2: started .*, unknown at .*; error: no reply within 10 s"
# Text from outside (a provider's error) is shown with its control characters escaped: it
# cannot rewrite the operator's terminal.
q "$db" "UPDATE idem.external_attempts SET error = E'bad\\x1b[2Jreply\\r' WHERE tenant = 'acme'
    AND operation_id = 'op-2' AND attempt = 2" >/dev/null
check show_control 0 "$tool" --dsn "$op_dsn" show acme op-2
expect show_control_escaped contains 'error: bad\\x1b\[2Jreply\\x0d'
expect show_control_no_escape test "$(printf '%s' "$out" | tr -d -c '\033\r' | wc -c)" = 0
check show_json 0 "$tool" --dsn "$op_dsn" show acme op-1 --json
expect show_json_history json_ok 'd["external"]["downstream_key"] == "key-op-1" and [a["outcome"] for a in d["external"]["attempts"]] == ["lease_expired", "unknown"] and d["external"]["lease_live"] is False'
expect show_json_no_probes json_ok 'd["external"]["probes"] == []'
# The provider's answers to a resolver, as the library records them (migration 0011).
q "$db" "INSERT INTO idem.external_probes (tenant, operation_id, probe_id, took_ms, asked_by,
    resolver, answer, reason, changed) VALUES ('acme', 'op-2',
    '01900000-0000-7000-8000-000000000001', 2000, 'retry', 'mail status', 'unknown',
    E'resolver mail status gave no answer within 2000 ms\x1b[2J', false)" >/dev/null
check show_probes 0 "$tool" --dsn "$op_dsn" show acme op-2
expect show_probes_count contains "provider asked: 1"
expect show_probes_answer contains 'UTC by mail status (retry, 2000 ms): unknown; resolver mail status gave no answer within 2000 ms\\x1b\[2J'
check show_probes_json 0 "$tool" --dsn "$op_dsn" show acme op-2 --json
expect show_probes_json_answer json_ok '[(p["asked_by"], p["answer"], p["changed"], p["took_ms"]) for p in d["external"]["probes"]] == [("retry", "unknown", False, 2000)]'

# Resolved as completed: the receipt every later call replays, the reference, the item.
check resolve_completed 0 "$tool" --dsn "$op_dsn" resolve acme op-1 --as completed \
    --reference msg-42 --receipt '{"message_id": "msg-42"}' --note "delivered, per the provider log" --by "Ops"
expect resolve_completed_says contains "resolved operation op-1 in tenant acme as completed"
expect resolve_completed_record test "$(q "$db" "SELECT state || ' ' || convert_from(response, 'UTF8') || ' ' || provider_ref FROM idem.operations WHERE tenant = 'acme' AND operation_id = 'op-1'")" = 'completed {"message_id":"msg-42"} msg-42'
expect resolve_completed_item test "$(q "$db" "SELECT resolved_by || ': ' || note FROM idem.reconciliation_items WHERE tenant = 'acme' AND operation_id = 'op-1'")" = "Ops: delivered, per the provider log"
expect resolve_only_that_tenant test "$(q "$db" "SELECT state FROM idem.operations WHERE tenant = 'globex'")" = outcome_unknown
check resolve_twice 2 "$tool" --dsn "$op_dsn" resolve acme op-1 --as failed --note again
expect resolve_twice_says err_contains "already completed"

check resolve_abandoned 0 "$tool" --dsn "$op_dsn" resolve acme op-2 --as abandoned --note "customer gave up" --json
expect resolve_abandoned_json json_ok 'd["resolved_as"] == "abandoned"'
expect resolve_abandoned_record test "$(q "$db" "SELECT state || ' ' || convert_from(response, 'UTF8') FROM idem.operations WHERE tenant = 'acme' AND operation_id = 'op-2'")" = 'failed {"note":"customer gave up","resolution":"abandoned"}'

check resolve_bad_receipt 64 "$tool" --dsn "$op_dsn" resolve globex op-1 --as completed --receipt '{oops' --note x
expect resolve_bad_receipt_names_field err_contains "resolution.receipt"
check resolve_missing 2 "$tool" --dsn "$op_dsn" resolve globex op-9 --as failed --note x

# A live lease: an attempt is running; try later.
q "$db" "UPDATE idem.operations SET state = 'pending', lease_expires_at = now() + interval '1 hour' WHERE tenant = 'globex'" >/dev/null
check resolve_live_lease 75 "$tool" --dsn "$op_dsn" resolve globex op-1 --as failed --note x
expect resolve_live_lease_says err_contains "live lease"

# A local record left pending after its transaction ended (stalled_pending): listed before
# any request meets it, resolved with --as like an external one, never too early.
stalled() { # stalled DB TENANT OPERATION_ID AGE
    q "$1" "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version,
        fingerprint, state, claim_token, created_at, expires_at, forget_at)
        VALUES ('$2', '$3', 'create_task', 1, sha256('$3'), 'pending', gen_random_uuid(),
        now() - interval '$4', now() + interval '7 days', now() + interval '30 days')"
}
stalled "$db" acme local-1 "10 minutes"
stalled "$db" acme local-2 "5 seconds"
check list_stalled 0 "$tool" --dsn "$op_dsn" list --kind stalled_pending --json
expect list_stalled_one json_ok '[i["operation_id"] for i in d["items"]] == ["local-1"] and d["items"][0]["count"] == 0'
check resolve_stalled_too_early 75 "$tool" --dsn "$op_dsn" resolve acme local-2 --as failed --note x
expect resolve_stalled_too_early_says err_contains "stalled_pending"
check resolve_stalled 0 "$tool" --dsn "$op_dsn" resolve acme local-1 --as completed \
    --receipt '{"task_id": 7}' --note "the task was there" --by Ops
expect resolve_stalled_record test "$(q "$db" "SELECT state || ' ' || convert_from(response, 'UTF8') FROM idem.operations WHERE tenant = 'acme' AND operation_id = 'local-1'")" = 'completed {"task_id":7}'
expect resolve_stalled_item test "$(q "$db" "SELECT kind || ' ' || resolved_by || ': ' || note FROM idem.reconciliation_items WHERE tenant = 'acme' AND operation_id = 'local-1'")" = "stalled_pending Ops: the task was there"
check list_stalled_after 0 "$tool" --dsn "$op_dsn" list --kind stalled_pending --open --json
expect list_stalled_after_none json_ok 'd["items"] == []'

finish
