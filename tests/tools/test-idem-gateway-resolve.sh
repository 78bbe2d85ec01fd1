#!/usr/bin/env bash
# test-idem-gateway-resolve.sh IDEM-GATEWAY IDEM-MIGRATE IDEM-RECONCILE IDEM-SWEEP: the
# declarative resolvers of http tools against a fake provider (upstream.py) that records
# what it really did under each downstream key and answers status requests from that:
# unknown then done (the retry replays the provider's answer, nothing dispatched), not done
# (dispatched once more with the same key), failed (rejected, stored); a resolver that
# hangs, fails or answers garbage leaves the outcome unknown with the reason; three askers
# held together change the record once; idem-reconcile probe (list, one, --all, exit
# codes) and idem-sweep --config (its cap and backoff); --check-config of resolvers.
# IDEM-GATEWAY is "" when the gateway is not built (skip).
set -uo pipefail
gateway=$1 migrate=$2 reconcile=$3 sweep=$4 prefix=gwr
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/gateway.sh"
gateway_required "libmicrohttpd, libcurl"

export MAILER_TOKEN=sk_test_resolve
tok=acme-token-1

upstream plain
up=$upstream_port

post() { curl -sS -X POST "http://127.0.0.1:$up/$1" -d "$2" >/dev/null; }
# script PATH ACTIONS / status_script PATH ACTIONS
script() { post _script "{\"path\": \"$1\", \"actions\": $2}"; }
status_script() { post _status "{\"path\": \"$1\", \"actions\": $2}"; }
upstream_log() {
    curl -sS "http://127.0.0.1:$up/_log" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"
}
# dispatched PATH KEY: the requests PATH received with downstream key KEY.
dispatched() { upstream_log "len([r for r in d['requests'] if r['path'] == '$1' and r['key'] == '$2'])"; }
asked() { upstream_log "len([s for s in d['status'] if s['path'] == '$1'])"; }
acts() { upstream_log "d['acts'].get('$1', 0)"; }

# Each program as its documented role (tools/idem-roles.sql), none a superuser: the gateway
# as idem_app, idem-reconcile as idem_operator alone, idem-sweep --config as idem_sweeper
# and idem_operator. The operator records the answers it asks for (migration 0015).
db=$(newdb main)
as_role "$db" idem_app
dsn=$role_dsn
as_role "$db" idem_operator
op_dsn=$role_dsn
as_role "$db" idem_sweeper idem_operator
sweep_dsn=$role_dsn

# tool NAME PATH [RESOLVER-JSON]: an http tool; dispatches time out after 1 s.
tool() {
    cat <<JSON
    "$1": {
      "arguments": {"type": "object", "required": ["to"], "properties": {"to": {"type": "string"}}},
      "http": {
        "url": "http://127.0.0.1:$up$2",
        "headers": {"Authorization": {"env": "MAILER_TOKEN", "prefix": "Bearer "}},
        "timeout_ms": 1000, "lease_ms": 2000, "reference": "/id",
        "retry": {"max_attempts": 1}
        ${3:+, \"resolver\": $3}
      }
    }
JSON
}
resolver() {
    echo "{\"url\": \"http://127.0.0.1:$up$1/status/{key}\", \"receipt\": \"/message\",
      \"done_when\": {\"pointer\": \"/state\", \"equals\": \"sent\"}, \"failed_status\": [410],
      \"timeout_ms\": ${2:-1500}}"
}
cfg="$scratch/gateway.json"
cat >"$cfg" <<JSON
{
  "http": {"address": "127.0.0.1", "port": 0},
  "database": {"dsn": "$dsn", "deadline_ms": 60000},
  "tenants": {"acme": {"tokens": ["$(printf '%s' $tok | "$gateway" hash-token)"]}},
  "tools": {
$(tool send_email /mail "$(resolver /mail)"),
$(tool send_slow /slow "$(resolver /slow 500)"),
$(tool send_plain /plain),
$(tool send_three /three "$(resolver /three 30000)")
  }
}
JSON

# ---------------------------------------------------------------------------------------
# --check-config of resolvers: every error names its place.
check check_config_ok 0 "$gateway" --check-config "$cfg"
broken() {
    edited_config "$cfg" "$scratch/$1.json" "$2" 'r = d["tools"]["send_email"]["http"]["resolver"]'
    check "check_config_$1" 65 "$gateway" --check-config "$scratch/$1.json"
    expect "check_config_$1_names_it" err_contains "$3"
    check "probe_config_$1" 65 "$reconcile" --dsn "$op_dsn" probe --config "$scratch/$1.json"
    expect "probe_config_$1_names_it" err_contains "$3"
}
broken no_key 'r["url"] = "http://127.0.0.1:1/status"' '/tools/send_email/http/resolver/url: must hold {key}'
broken other_placeholder 'r["url"] = "http://127.0.0.1:1/s/{/to}"' \
    '/tools/send_email/http/resolver/url: its only placeholder is {key}'
broken bad_scheme 'r["url"] = "ftp://x/{key}"' '/tools/send_email/http/resolver/url: must start with'
broken overlap 'r["failed_status"] = [410, 200]' \
    '/tools/send_email/http/resolver/done_status: is needed: its default .200. is also in failed_status'
broken overlap_given 'r["done_status"] = [200]; r["failed_status"] = [410, 200]' \
    '/tools/send_email/http/resolver/failed_status/1: 200 is already in done_status'
broken default_overlap 'r["done_status"] = [200, 404]' \
    '/tools/send_email/http/resolver/not_done_status: is needed: its default .404. is also in done_status'
broken bad_status 'r["not_done_status"] = [404, 99]' \
    '/tools/send_email/http/resolver/not_done_status/1: not an HTTP status'
broken bad_receipt 'r["receipt"] = "message"' '/tools/send_email/http/resolver/receipt: must be a JSON Pointer'
broken when_no_value 'del r["done_when"]["equals"]' '/tools/send_email/http/resolver/done_when/equals: is required'
broken bad_timeout 'r["timeout_ms"] = 0' '/tools/send_email/http/resolver/timeout_ms'
broken unknown_member 'r["method"] = "GET"' '/tools/send_email/http/resolver/method: unknown member'

# ---------------------------------------------------------------------------------------
log="$scratch/gateway.log"
"$gateway" --config "$cfg" 2>>"$log" &
gw_pid=$!
pids+=("$gw_pid")
gateway_port "$log" "$gw_pid"

call() {
    http -X POST "http://127.0.0.1:$port/v1/tools/$1" -H "Authorization: Bearer $tok" \
        -H "Idempotency-Key: $2" -H 'Content-Type: application/json' --data-binary '{"to": "a@example.com"}'
}
hdr() { sed -n "s/^$1: \(.*\)\r$/\1/Ip" "$scratch/headers"; }
# is NAME VALUE EXPECTED
is() {
    n=$((n + 1))
    [ "$2" = "$3" ] && return 0
    echo "FAIL: $1: '$2', expected '$3' (last body: $body)" >&2
    failures=$((failures + 1))
}
# downstream TENANT KEY: the operation's downstream key.
downstream() {
    "$reconcile" --dsn "$op_dsn" show --json "$1" "$2" |
        python3 -c "import json,sys; print(json.load(sys.stdin)['external']['downstream_key'])"
}
# probes KEY EXPR: evaluated on the list of recorded answers (p).
probes() {
    "$reconcile" --dsn "$op_dsn" show --json acme "$1" |
        python3 -c "import json,sys; p=json.load(sys.stdin)['external']['probes']; print($2)"
}
# unknown_call TOOL KEY ACTION: a call whose dispatch ends outcome_unknown (502).
unknown_call() {
    script "$3" "[\"$4\"]"
    call "$1" "$2"
    is "$2_first_unknown" "$status" 502
}

# Unknown, then done: the retry asks, the provider did it: its answer replayed, nothing sent.
unknown_call send_email k-done /mail drop
ds=$(downstream acme k-done)
call send_email k-done
is done_retry_status "$status" 201
is done_retry_replayed "$(hdr Idempotent-Replayed)" true
is done_receipt_is_providers "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['path'])" "$scratch/body")" /mail
is done_no_second_dispatch "$(dispatched /mail "$ds")" 1
is done_asked_by_key "$(upstream_log "[s['key'] for s in d['status'] if s['path'] == '/mail'][-1]")" "$ds"
is done_history "$(probes k-done "[(x['asked_by'], x['answer'], x['changed']) for x in p]")" "[('retry', 'done', True)]"
call send_email k-done
is done_replayed_again "$status/$(dispatched /mail "$ds")/$(asked /mail)" 201/1/1

# Not done: the provider never acted (its answer hung before acting): dispatched once more,
# with the same key.
unknown_call send_email k-notdone /mail hang
curl -sS -X POST "http://127.0.0.1:$up/_release" >/dev/null
ds=$(downstream acme k-notdone)
call send_email k-notdone
is notdone_retry_created "$status" 201
is notdone_same_key_twice "$(dispatched /mail "$ds")" 2
is notdone_history "$(probes k-notdone "[x['answer'] for x in p]")" "['not_done']"

# Failed: the provider refused it for good: rejected with its answer, stored.
unknown_call send_email k-failed /mail drop
status_script /mail '["refused"]'
call send_email k-failed
is failed_rejected "$status/$(hdr Idem-Status)" 410/rejected
call send_email k-failed
is failed_stored "$status/$(hdr Idem-Status)/$(asked /mail)" 410/rejected/3

# A resolver that hangs, fails or answers garbage: still unknown, the reason recorded.
unknown_call send_email k-bad /mail drop
for action in fail garbage; do
    status_script /mail "[\"$action\"]"
    call send_email k-bad
    is "bad_${action}_unknown" "$status" 502
done
unknown_call send_slow k-hang /slow drop
status_script /slow '["hang"]'
call send_slow k-hang
is hang_unknown "$status" 502
curl -sS -X POST "http://127.0.0.1:$up/_release" >/dev/null
reasons=$(probes k-bad "' | '.join(x['answer'] + ': ' + (x['reason'] or '') for x in p)")
out=$reasons
expect bad_fail_reason contains "unknown: HTTP 500, which is in none of done_status"
expect bad_garbage_reason contains "unknown: HTTP 200, but the answer is not JSON"
out=$(probes k-hang "' | '.join(x['answer'] + ': ' + (x['reason'] or '') for x in p)")
expect hang_reason contains "unknown: "
# The library gives up after timeout_ms, or the status request times out first: either says so.
expect hang_reason_timeout contains "no answer within [0-9]* ms\|timed out after"

# ---------------------------------------------------------------------------------------
# idem-reconcile probe.
check probe_needs_config 64 "$reconcile" --dsn "$op_dsn" probe acme k-bad
check probe_config_missing 66 "$reconcile" --dsn "$op_dsn" probe --config "$scratch/none.json"
check probe_list 0 "$reconcile" --dsn "$op_dsn" probe --config "$cfg"
expect probe_list_rows contains "k-bad .*send_email .*yes .*2"
expect probe_list_summary contains "2 open outcome_unknown items, 2 with a resolver"
check probe_not_found 2 "$reconcile" --dsn "$op_dsn" probe acme k-none --config "$cfg"
check probe_settled_not_asked 12 "$reconcile" --dsn "$op_dsn" probe acme k-done --config "$cfg"
expect probe_settled_says err_contains "not asked"
unknown_call send_plain k-plain /plain drop
check probe_no_resolver 12 "$reconcile" --dsn "$op_dsn" probe acme k-plain --config "$cfg"
expect probe_no_resolver_says err_contains "no resolver"
status_script /mail '["fail"]'
check probe_one_unknown 11 "$reconcile" --dsn "$op_dsn" probe acme k-bad --config "$cfg"
expect probe_one_unknown_reason contains "acme k-bad (send_email): unknown: .*HTTP 500, which is in none"
check probe_one_done 0 "$reconcile" --dsn "$op_dsn" probe --json acme k-bad --config "$cfg"
expect probe_one_done_json json_ok "d['verdict'] == 'done' and d['changed'] is True"
is probe_recorded_as_probe "$(probes k-bad "p[-1]['asked_by']")" probe

# Three askers (two probes and a retry) held by the provider until all three have arrived:
# one change of state, three answers recorded.
unknown_call send_three k-three /three drop
ds=$(downstream acme k-three)
status_script /three '["gather 3", "gather 3", "gather 3"]'
"$reconcile" --dsn "$op_dsn" probe acme k-three --config "$cfg" >"$scratch/p1" 2>&1 &
p1=$!
"$reconcile" --dsn "$op_dsn" probe acme k-three --config "$cfg" >"$scratch/p2" 2>&1 &
p2=$!
call send_three k-three
wait $p1; r1=$?
wait $p2; r2=$?
is three_retry_replayed "$status/$(hdr Idempotent-Replayed)" 201/true
is three_probes_exit "$r1/$r2" 0/0
is three_history "$(probes k-three "sorted(x['answer'] for x in p)")" "['done', 'done', 'done']"
is three_one_change "$(probes k-three "sum(1 for x in p if x['changed'])")" 1
is three_no_dispatch "$(dispatched /three "$ds")" 1
is three_asked "$(asked /three)" 3
is three_item_resolved "$(q "$db" "SELECT count(*) FROM idem.reconciliation_items WHERE operation_id = 'k-three' AND resolved_at IS NOT NULL")" 1

# --all: each open item with a resolver, the others counted.
check probe_all 0 "$reconcile" --dsn "$op_dsn" probe --all --config "$cfg"
expect probe_all_hang_done contains "acme k-hang (send_slow): done"
expect probe_all_summary contains "asked 1: 1 settled, 0 still unknown; 1 without a resolver"
check probe_all_usage 64 "$reconcile" --dsn "$op_dsn" probe --all acme k-hang --config "$cfg"

# ---------------------------------------------------------------------------------------
# idem-sweep --config: at most --probe-limit per run, least recently asked first, then
# each only after its backoff.
for k in s1 s2 s3; do unknown_call send_email "k-$k" /mail drop; done
status_script /mail '["fail", "fail", "fail", "fail", "fail", "fail"]'
check sweep_probe_cap 0 "$sweep" --dsn "$sweep_dsn" --config "$cfg" --probe-limit 2 --json
expect sweep_probe_cap_json json_ok "d['probes'] == {'due': 3, 'asked': 2, 'settled': 0, 'unknown': 2, 'waiting': 0}"
is sweep_probe_cap_recorded "$(q "$db" "SELECT count(*) FROM idem.external_probes WHERE operation_id IN ('k-s1', 'k-s2', 'k-s3') AND asked_by = 'probe'")" 2
check sweep_probe_backoff 0 "$sweep" --dsn "$sweep_dsn" --config "$cfg" --probe-limit 2 --json
expect sweep_probe_backoff_json json_ok "d['probes'] == {'due': 1, 'asked': 1, 'settled': 0, 'unknown': 1, 'waiting': 2}"
check sweep_probe_dry_run 0 "$sweep" --dsn "$sweep_dsn" --config "$cfg" --dry-run
expect sweep_probe_dry_run_says contains "dry run: 0 outcome_unknown items due to be asked about, 3 waiting"
status_script /mail '[]'
sleep 2.2 # past a backoff of 1 s after the first question (2 s after the second): no timing asserted
check sweep_probe_settles 0 "$sweep" --dsn "$sweep_dsn" --config "$cfg" --probe-backoff 1 --verbose
expect sweep_probe_settles_says err_contains "asked the provider about 3 outcome_unknown items: 3 settled"
is sweep_probe_settled_records "$(q "$db" "SELECT count(*) FROM idem.operations WHERE operation_id IN ('k-s1', 'k-s2', 'k-s3') AND state = 'completed'")" 3
check sweep_config_bad 65 "$sweep" --dsn "$sweep_dsn" --config "$scratch/no_key.json"
check sweep_probe_options_need_config 64 "$sweep" --dsn "$sweep_dsn" --probe-limit 3

finish
