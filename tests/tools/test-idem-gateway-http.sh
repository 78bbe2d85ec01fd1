#!/usr/bin/env bash
# test-idem-gateway-http.sh IDEM-GATEWAY IDEM-MIGRATE: the gateway's http tools against a
# real upstream service (upstream.py, which records what it receives and answers as
# scripted) and the server of tools/with-postgres: the downstream key on every attempt, a
# 5xx retried then done once, a 4xx stored and replayed byte for byte, a hang and a dropped
# reply as outcome_unknown never sent again, the policy spent as 503, a gateway killed
# after dispatch resumed with the same key, secrets kept out of logs and problems; and
# --check-config of http tools. IDEM-GATEWAY is "" when the gateway is not built (skip).
set -uo pipefail
gateway=$1 migrate=$2 prefix=gwh
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/gateway.sh"
gateway_required "libmicrohttpd, libcurl"

secret='sk_live_Zq8mSECRETv41ue'
export MAILER_TOKEN=$secret
tok=acme-token-1

# The upstream service, and the same over HTTPS with a certificate of its own.
upstream plain
up=$upstream_port
# Without the openssl command (Debian openssl) the TLS checks are left out, saying so.
tls_up= ntools=7
if command -v openssl >/dev/null; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
        -addext subjectAltName=IP:127.0.0.1 -keyout "$scratch/key.pem" -out "$scratch/cert.pem" \
        >/dev/null 2>&1 || { echo "FAIL: openssl cannot make a certificate" >&2; exit 1; }
    upstream tls "$scratch/cert.pem" "$scratch/key.pem"
    tls_up=$upstream_port ntools=9
else
    echo "NOTE: no openssl command: the TLS checks are left out" >&2
fi
# script PATH ACTIONS-JSON [HONOUR]
script() {
    curl -sS -X POST "http://127.0.0.1:$up/_script" \
        -d "{\"path\": \"$1\", \"actions\": $2, \"honour\": ${3:-true}}" >/dev/null
}
# upstream_log PYTHON-EXPR: evaluated on the log (d); prints it.
upstream_log() {
    curl -sS "http://127.0.0.1:$up/_log" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"
}
received() { upstream_log "len([r for r in d['requests'] if r['path'] == '$1'])"; }
keys() { upstream_log "' '.join(sorted(set(r['key'] or '-' for r in d['requests'] if r['path'] == '$1')))"; }
acts() { upstream_log "d['acts'].get('$1', 0)"; }

# tool NAME PATH TIMEOUT_MS LEASE_MS [EXTRA-MEMBERS]: an http tool's JSON.
tool() {
    cat <<JSON
    "$1": {
      "arguments": {"type": "object", "required": ["to"], "additionalProperties": false,
        "properties": {"to": {"type": "string"}, "subject": {"type": "string"},
                       "case": {"type": "string"}}},
      "http": {
        "method": "POST", "url": "http://127.0.0.1:$up$2",
        "headers": {"Authorization": {"env": "MAILER_TOKEN", "prefix": "Bearer "},
                    "Accept": "application/json"},
        "body": {"to": {"\$arg": "/to"}, "subject": {"\$arg": "/subject"},
                 "from": "noreply@example.com"},
        "timeout_ms": $3, "lease_ms": $4,
        "retry": {"max_attempts": 3, "base_delay_ms": 10, "max_delay_ms": 50, "deadline_ms": 60000}
        ${5:-}
      }
    }
JSON
}

# config FILE DSN
config() {
    cat >"$1" <<JSON
{
  "http": {"address": "127.0.0.1", "port": 0, "retry_after_s": 3},
  "database": {"dsn": "$2", "deadline_ms": 30000},
  "tenants": {"acme": {"tokens": ["$(printf '%s' $tok | "$gateway" hash-token)"]}},
  "tools": {
$(tool send_email /v1/messages 10000 11000 ', "reference": "/id"'),
$(tool send_case '/v1/cases/{/case}/messages' 10000 11000),
$(tool send_hang /v1/hang 1000 2000),
$(tool send_held /v1/held 120000 121000),
$(tool send_closed /v1/closed 10000 11000),
$(tool send_refused_port /v1/x 2000 3000 | sed "s|127.0.0.1:$up|127.0.0.1:1|"),
$(tool send_409_final /v1/conflict 10000 11000 ', "statuses": {"409": "final", "503": "unknown"}')
$([ -z "$tls_up" ] || tool send_tls /v1/tls 10000 11000 | sed "1s/^/,/; s|http://127.0.0.1:$up|https://127.0.0.1:$tls_up|")
$([ -z "$tls_up" ] || tool send_tls_ca /v1/tls 10000 11000 ", \"ca_file\": \"$scratch/cert.pem\"" |
    sed "1s/^/,/; s|http://127.0.0.1:$up|https://127.0.0.1:$tls_up|")
  }
}
JSON
}

# start NAME CONFIG: a gateway in the background, its stderr in $scratch/NAME.log; sets
# $port and $gw_pid.
start() {
    local log="$scratch/$1.log"
    "$gateway" --config "$2" 2>>"$log" &
    gw_pid=$!
    pids+=("$gw_pid")
    gateway_port "$log" "$gw_pid" "$3"
}

# http ARGS...: curl; the status in $status, the body in $scratch/body (and $body), the
# headers in $scratch/headers; every body is also kept in $scratch/bodies.
http() {
    status=$(curl -sS -o "$scratch/body" -D "$scratch/headers" -w '%{http_code}' "$@")
    body=$(tr -d '\0' <"$scratch/body") # the text, for messages
    cat "$scratch/body" "$scratch/headers" >>"$scratch/bodies"
}
# call TOOL KEY JSON
call() {
    http -X POST "http://127.0.0.1:$port/v1/tools/$1" -H "Authorization: Bearer $tok" \
        -H "Idempotency-Key: $2" -H 'Content-Type: application/json' --data-binary "$3"
}
hdr() { sed -n "s/^$1: \(.*\)\r$/\1/Ip" "$scratch/headers"; }
type_is() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['type'] == 'urn:idem:problem:' + sys.argv[2] and d['status'] == int(sys.argv[3]), d" "$scratch/body" "$1" "$status"; }
# answer NAME STATUS [TYPE]: the last answer had STATUS (and the problem TYPE).
answer() {
    n=$((n + 1))
    if [ "$status" != "$2" ] || { [ -n "${3:-}" ] && ! type_is "$3" 2>/dev/null; }; then
        echo "FAIL: $1: HTTP $status, expected $2 ${3:-}; body: $body" >&2
        failures=$((failures + 1))
        return 1
    fi
}

# ---------------------------------------------------------------------------------------
# --check-config of http tools.
good="$scratch/good.json"
config "$good" "dbname=x"
check check_config_good 0 "$gateway" --check-config "$good"
expect check_config_counts contains ": ok: 1 tenant, $ntools tools"
broken() {
    edited_config "$good" "$scratch/$1.json" "$2" 'h = d["tools"]["send_email"]["http"]'
    check "check_config_$1" 65 env ${4:+"$4"} "$gateway" --check-config "$scratch/$1.json"
    expect "check_config_$1_names_it" err_contains "$3"
}
# Each refusal of an http tool's declaration, by its place and reason: the unit test
# gateway_config; here, that the command says it, exits 65 and never echoes the secret.
broken env_line_break 'h["headers"]["Authorization"]["env"] = "IDEM_TEST_BROKEN_TOKEN"' \
    '/tools/send_email/http/headers/Authorization/env: the environment variable IDEM_TEST_BROKEN_TOKEN holds a line break' \
    "IDEM_TEST_BROKEN_TOKEN=$secret"$'\n'x
expect check_config_secret_not_echoed lacks "$secret"

# The manual's example, checked as written (its secret from the environment).
python3 - "$(dirname "$0")/../../tools/idem-gateway/README.md" "$scratch/readme.json" <<'PY'
import re, sys
blocks = re.findall(r"```json\n(.*?)```", open(sys.argv[1]).read(), re.S)
open(sys.argv[2], "w").write([b for b in blocks if '"send_email"' in b][0])
PY
check readme_example_valid 0 "$gateway" --check-config "$scratch/readme.json"
check readme_example_needs_secret 65 env -u MAILER_TOKEN "$gateway" --check-config "$scratch/readme.json"
expect readme_example_names_secret err_contains '/tools/send_email/http/headers/Authorization/env: the environment variable MAILER_TOKEN is not set'

# ---------------------------------------------------------------------------------------
# The server.
db=$(newdb main)
login_role idem_test_gateway_http idem_app
cfg="$scratch/gateway.json"
config "$cfg" "dbname=$db user=idem_test_gateway_http"
start main "$cfg" 1
to='{"to": "ada@example.com", "subject": "hello"}'

# Success: the upstream's JSON is the receipt; the key, the secret, the body mapping sent.
call send_email k-ok-1 "$to"
answer ok_created 201 && expect ok_status_created test "$(hdr Idem-Status)" = created
expect ok_receipt_is_upstream_json python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert d['path'] == '/v1/messages' and d['id'].startswith('msg_'), d" "$body"
first=$body
call send_email k-ok-1 "$to"
answer ok_replayed 201 && expect ok_replayed_header test "$(hdr Idempotent-Replayed)" = true
expect ok_same_bytes test "$body" = "$first"
expect ok_dispatched_once test "$(received /v1/messages)" = 1
expect ok_key_sent python3 -c "import sys; k=sys.argv[1]; assert len(k) >= 16 and ' ' not in k and k != 'k-ok-1', k" "$(keys /v1/messages)"
expect ok_secret_sent test "$(upstream_log "d['requests'][-1]['headers']['Authorization']")" = "Bearer $secret"
expect ok_body_mapped test "$(upstream_log "d['requests'][-1]['body']")" = \
    '{"to":"ada@example.com","subject":"hello","from":"noreply@example.com"}'
expect ok_reference_stored test "$(q "$db" "SELECT provider_ref FROM idem.operations WHERE operation_id = 'k-ok-1'")" = \
    "$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['id'])" "$first")"
expect ok_json_type test "$(upstream_log "d['requests'][-1]['headers']['Content-Type']")" = application/json

# The URL template: the argument percent-encoded into the path; a missing one is a 400.
call send_case k-case-1 '{"to": "x", "case": "a b/c?d"}'
answer case_created 201
expect case_path_encoded test "$(upstream_log "d['requests'][-1]['path']")" = '/v1/cases/a%20b%2Fc%3Fd/messages'
call send_case k-case-2 '{"to": "x"}'
answer case_missing_argument 400 invalid-arguments
expect case_missing_names_it python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['pointer'] == '/case', d" "$scratch/body"

# A 2xx that is not JSON: the documented envelope.
script /v1/messages '["text"]'
call send_email k-text-1 "$to"
answer text_created 201
expect text_no_reference test -z "$(q "$db" "SELECT provider_ref FROM idem.operations WHERE operation_id = 'k-text-1'")"
expect text_envelope python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert d == {'status': 202, 'content_type': 'text/plain', 'body': 'queued'}, d" "$body"

# 5xx, then success: retried with the same downstream key, done once.
before=$(received /v1/messages)
script /v1/messages '["fail", "ok"]'
call send_email k-retry-1 "$to"
answer retry_then_created 201
expect retry_two_requests test "$(($(received /v1/messages) - before))" = 2
expect retry_same_key test "$(upstream_log "len(set(r['key'] for r in d['requests'][-2:]))")" = 1
call send_email k-retry-1 "$to"
answer retry_replayed 201 && expect retry_replayed_header test "$(hdr Idempotent-Replayed)" = true
expect retry_no_more_requests test "$(($(received /v1/messages) - before))" = 2
expect retry_reused_connection test "$(upstream_log "len(set(r['peer'] for r in d['requests'][-2:]))")" = 1

# 5xx until the policy is spent: 503 with Retry-After, every attempt with the same key;
# the client's retry later sends the same key again, and succeeds.
before=$(received /v1/messages)
script /v1/messages '["fail", "fail", "fail", "fail"]'
call send_email k-spent-1 "$to"
answer spent_unavailable 503 unavailable
expect spent_retry_after test "$(hdr Retry-After)" = 3
expect spent_three_attempts test "$(($(received /v1/messages) - before))" = 3
spent_key=$(upstream_log "d['requests'][-1]['key']")
call send_email k-spent-1 "$to"
answer spent_retry_created 201
expect spent_four_plus_one test "$(($(received /v1/messages) - before))" = 5
expect spent_same_key_on_every_attempt test "$(upstream_log "len(set(r['key'] for r in d['requests'][-5:]))")" = 1
expect spent_key_is_the_first test "$(upstream_log "d['requests'][-1]['key']")" = "$spent_key"

# A 4xx: a final refusal, stored; its status and bytes replayed, never sent again.
before=$(received /v1/messages)
script /v1/messages '["refuse"]'
call send_email k-refuse-1 "$to"
answer refused 422 && expect refused_status test "$(hdr Idem-Status)" = rejected
expect refused_upstream_status test "$(hdr Idem-Upstream-Status)" = 422
expect refused_type test "$(hdr Content-Type)" = application/json
cmp -s "$scratch/body" <(printf '{"error" :  "invalid recipient",\n "code": 7}')
expect refused_bytes test $? = 0
call send_email k-refuse-1 "$to"
answer refused_again 422 && expect refused_again_status test "$(hdr Idem-Status)" = rejected
cmp -s "$scratch/body" <(printf '{"error" :  "invalid recipient",\n "code": 7}')
expect refused_again_bytes test $? = 0
expect refused_again_upstream_status test "$(hdr Idem-Upstream-Status)" = 422
expect refused_once test "$(($(received /v1/messages) - before))" = 1

# A refusal whose bytes are not UTF-8: the same bytes replayed.
script /v1/messages '["binary"]'
call send_email k-binary-1 "$to"
answer binary_refused 400 && expect binary_rejected test "$(hdr Idem-Status)" = rejected
cmp -s "$scratch/body" <(printf '\377\000\376 refused')
expect binary_bytes test $? = 0
call send_email k-binary-1 "$to"
answer binary_again 400 && expect binary_again_type test "$(hdr Content-Type)" = application/octet-stream
cmp -s "$scratch/body" <(printf '\377\000\376 refused')
expect binary_again_bytes test $? = 0

# TLS: a certificate no CA vouches for is refused before anything is sent (transient, then
# 503); with the tool's ca_file it is trusted.
if [ -n "$tls_up" ]; then
    call send_tls k-tls-1 "$to"
    answer tls_unverified_unavailable 503 unavailable
    expect tls_nothing_received test "$(curl -sS --cacert "$scratch/cert.pem" "https://127.0.0.1:$tls_up/_log" | python3 -c "import json,sys; print(len(json.load(sys.stdin)['requests']))")" = 0
    call send_tls_ca k-tls-2 "$to"
    answer tls_with_ca_created 201
fi

# Configuration changes a class: 409 final, 503 unknown.
script /v1/conflict '["fail"]'
call send_409_final k-conf-1 "$to"
answer reclassified_unknown 502 outcome-unknown
expect reclassified_once test "$(received /v1/conflict)" = 1

# A hang: the timeout is outcome_unknown; never dispatched again, on any retry.
script /v1/hang '["hang"]' false
call send_hang k-hang-1 "$to"
answer hang_unknown 502 outcome-unknown
expect hang_no_retry_after test -z "$(hdr Retry-After)"
call send_hang k-hang-1 "$to"
answer hang_again_unknown 502 outcome-unknown
call send_hang k-hang-1 "$to"
answer hang_third_unknown 502 outcome-unknown
expect hang_dispatched_once test "$(received /v1/hang)" = 1
expect hang_logged grep -q "send_hang: acme k-hang-1: attempt 1: no answer (unknown)" "$scratch/main.log"

# Over MCP (POST /mcp), through the same call path: created, then replayed, sent once; a
# hang ends outcome_unknown as an isError result, never sent again.
mcp_call() { # TOOL OPERATION-ID: a tools/call of TOOL with $to
    http -X POST "http://127.0.0.1:$port/mcp" -H "Authorization: Bearer $tok" \
        -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        -H 'MCP-Protocol-Version: 2025-11-25' --data-binary "{\"jsonrpc\": \"2.0\", \"id\": 7,
        \"method\": \"tools/call\", \"params\": {\"name\": \"$1\", \"arguments\": $to,
        \"_meta\": {\"idem/operation_id\": \"$2\"}}}"
}
# tools/list: an http tool reaches the world outside (openWorldHint).
http -X POST "http://127.0.0.1:$port/mcp" -H "Authorization: Bearer $tok" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2025-11-25' --data-binary '{"jsonrpc": "2.0", "id": 6, "method": "tools/list"}'
expect mcp_list_open_world python3 -c "import json,sys; t=[x for x in json.loads(sys.argv[1])['result']['tools'] if x['name'] == 'send_email'][0]; assert t['annotations']['openWorldHint'] is True, t" "$body"
mcp_status() { python3 -c "import json,sys; r=json.loads(sys.argv[1])['result']; assert r['structuredContent']['status'] == sys.argv[2] and bool(r.get('isError')) == (sys.argv[3] == 'error'), r" "$body" "$1" "$2"; }
sent=$(received /v1/messages)
mcp_call send_email k-mcp-1
answer mcp_ok 200 && expect mcp_ok_created mcp_status created ok
mcp_call send_email k-mcp-1
answer mcp_ok_again 200 && expect mcp_ok_replayed mcp_status replayed ok
expect mcp_ok_sent_once test "$(received /v1/messages)" = $((sent + 1))
script /v1/hang '["hang"]' false
sent=$(received /v1/hang)
mcp_call send_hang k-mcp-hang
answer mcp_hang 200 && expect mcp_hang_unknown mcp_status outcome_unknown error
mcp_call send_hang k-mcp-hang
answer mcp_hang_again 200 && expect mcp_hang_still_unknown mcp_status outcome_unknown error
expect mcp_hang_sent_once test "$(received /v1/hang)" = $((sent + 1))

# W3C Trace Context: the caller's traceparent (header, or an MCP message's _meta) goes
# upstream with the same trace-id and the gateway's span as the parent, which the log line
# names; none, or an invalid one (ignored, no error): a new trace, the same in both.
# log_field ID NAME: NAME's value in the log line of request ID (waited for: it is written
# once the answer is sent).
log_field() {
    for _ in $(seq 1 100); do
        grep -q "request id=$1 " "$scratch/main.log" && break
        sleep 0.1
    done
    grep "request id=$1 " "$scratch/main.log" | tail -1 | tr ' ' '\n' | sed -n "s/^$2=//p"
}
sent_header() { upstream_log "d['requests'][-1]['headers'].get('$1', '')"; }
tp=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
http -X POST "http://127.0.0.1:$port/v1/tools/send_email" -H "Authorization: Bearer $tok" \
    -H "Idempotency-Key: k-trace-1" -H 'Content-Type: application/json' -H "traceparent: $tp" \
    -H 'tracestate: rojo=00f067aa0ba902b7,congo=t61rcWkgMzE' -H 'X-Request-Id: trace-1' \
    --data-binary "$to"
answer trace_created 201
up_tp=$(sent_header traceparent)
expect trace_same_trace_id test "${up_tp:0:36}" = 00-4bf92f3577b34da6a3ce929d0e0e4736-
expect trace_parent_is_the_gateways_span test "${up_tp:36}" = "$(log_field trace-1 span)-01"
expect trace_span_is_new test "${up_tp:36:16}" != 00f067aa0ba902b7
expect trace_logged test "$(log_field trace-1 trace)" = 4bf92f3577b34da6a3ce929d0e0e4736
expect trace_state_passed test "$(sent_header tracestate)" = 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE'
http -X POST "http://127.0.0.1:$port/v1/tools/send_email" -H "Authorization: Bearer $tok" \
    -H "Idempotency-Key: k-trace-2" -H 'Content-Type: application/json' -H 'X-Request-Id: trace-2' \
    --data-binary "$to"
answer trace_none_created 201
up_tp=$(sent_header traceparent)
expect trace_none_new_trace test "$up_tp" = "00-$(log_field trace-2 trace)-$(log_field trace-2 span)-00"
expect trace_none_no_state test -z "$(sent_header tracestate)"
http -X POST "http://127.0.0.1:$port/v1/tools/send_email" -H "Authorization: Bearer $tok" \
    -H "Idempotency-Key: k-trace-3" -H 'Content-Type: application/json' -H 'X-Request-Id: trace-3' \
    -H 'traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01' --data-binary "$to"
answer trace_invalid_ignored 201
up_tp=$(sent_header traceparent)
expect trace_invalid_new_trace test "$up_tp" = "00-$(log_field trace-3 trace)-$(log_field trace-3 span)-00"
http -X POST "http://127.0.0.1:$port/mcp" -H "Authorization: Bearer $tok" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'X-Request-Id: trace-4' --data-binary "{\"jsonrpc\": \"2.0\", \"id\": 8,
    \"method\": \"tools/call\", \"params\": {\"name\": \"send_email\", \"arguments\": $to,
    \"_meta\": {\"dev.idem/operation_id\": \"k-trace-4\", \"traceparent\": \"$tp\"}}}"
answer trace_mcp 200 && expect trace_mcp_created mcp_status created ok
up_tp=$(sent_header traceparent)
expect trace_mcp_meta_sent test "$up_tp" = "00-4bf92f3577b34da6a3ce929d0e0e4736-$(log_field trace-4 span)-01"

# Done, then the connection dropped without an answer: outcome_unknown, not sent again
# (libcurl's own resend on a fresh connection is refused).
script /v1/closed '["ok", "drop"]' false
call send_closed k-drop-0 "$to"
answer drop_warm_created 201
call send_closed k-drop-1 "$to"
answer drop_unknown 502 outcome-unknown
call send_closed k-drop-1 "$to"
answer drop_again_unknown 502 outcome-unknown
expect drop_dispatched_once test "$(received /v1/closed)" = 2
q "$db" "SELECT count(*) FROM idem.reconciliation_items WHERE operation_id IN ('k-hang-1', 'k-drop-1') AND kind = 'outcome_unknown'" >"$scratch/items" 2>&1
expect unknown_items_opened test "$(cat "$scratch/items")" = 2

# Nothing listens: nothing sent, transient; the policy spent, 503.
call send_refused_port k-port-1 "$to"
answer refused_port_unavailable 503 unavailable
expect refused_port_says grep -q "nothing was sent" "$scratch/body"

# Killed with SIGKILL after dispatch, the upstream holding its answer: restarted, the call
# is in progress while the lease is live, then, the lease lapsed, resumed with the same
# downstream key; the upstream, honouring keys, acts once. The lease (its timeout, 120 s,
# and a second) outlasts any loaded machine's steps; the test ends it itself, on the
# database's clock that judges it, instead of waiting for it.
script /v1/held '["hold"]'
curl -sS -o /dev/null -X POST "http://127.0.0.1:$port/v1/tools/send_held" -H "Authorization: Bearer $tok" \
    -H "Idempotency-Key: k-held-1" -H 'Content-Type: application/json' --data-binary "$to" 2>/dev/null &
client=$!
for _ in $(seq 1 1200); do
    [ "$(received /v1/held)" = 1 ] && break
    sleep 0.05
done
expect held_dispatched test "$(received /v1/held)" = 1
call send_held k-held-1 "$to" # the lease is live: not sent again
answer held_in_progress 409 in-progress
expect held_in_progress_retry_after test "$(hdr Retry-After)" = 3
expect held_still_once test "$(received /v1/held)" = 1
kill -KILL "$gw_pid"
wait "$gw_pid" 2>/dev/null
wait "$client" 2>/dev/null
start main "$cfg" 2
call send_held k-held-1 "$to" # restarted, the lease still live: not sent again
answer held_in_progress_after_restart 409 in-progress
expect held_still_once_after_restart test "$(received /v1/held)" = 1
q "$db" "UPDATE idem.operations SET lease_expires_at = now() WHERE operation_id = 'k-held-1' AND lease_expires_at > now()" >/dev/null
call send_held k-held-1 "$to"
answer held_resumed_created 201
expect held_two_requests test "$(received /v1/held)" = 2
expect held_same_key test "$(keys /v1/held | wc -w)" = 1
expect held_acted_once test "$(acts /v1/held)" = 1
expect held_attempt_two test "$(q "$db" "SELECT count(*) FROM idem.external_attempts WHERE operation_id = 'k-held-1'")" = 2

# Secrets: never in the gateway's log nor in any answer.
expect secret_not_logged bash -c "! grep -qF '$secret' '$scratch/main.log'"
expect secret_not_answered bash -c "! grep -qF '$secret' '$scratch/bodies'"
expect log_not_empty test -s "$scratch/main.log"

kill -TERM "$gw_pid"
wait "$gw_pid"
expect sigterm_exit_0 test $? = 0
pids=("${pids[@]:0:$([ -n "$tls_up" ] && echo 2 || echo 1)}")

finish
