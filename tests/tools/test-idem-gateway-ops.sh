#!/usr/bin/env bash
# test-idem-gateway-ops.sh IDEM-GATEWAY IDEM-MIGRATE: idem-gateway in operation, against the
# server of tools/with-postgres: /healthz, /readyz, /metrics (parsed, counters checked
# after known calls), the request log (no token, no body; JSON lines), X-Request-Id echoed
# and stored as the trace ID; the new members' --check-config; hostile clients (oversized
# and malformed heads and bodies, invalid UTF-8, a 10 KB key, control characters: clear
# 4xx, the gateway keeps serving), slow clients cut, the connection limit; 1,000 idle
# connections and an upstream hanging for its full timeout while 100 calls complete (the
# RSS printed); SIGHUP (a removed token refused, an invalid file keeping the old
# configuration); SIGTERM with calls parked on a row lock, released within the grace
# period: every call answered, exit 0; a call outliving the grace period: exit 75, the call
# kept whole. IDEM-GATEWAY is "" when it is not built (skip).
set -uo pipefail
gateway=$1 migrate=$2 prefix=gwo
here=$(dirname "$0")
. "$here/common.sh"
. "$here/gateway.sh"
gateway_required "libmicrohttpd, libcurl"

trap gateway_cleanup EXIT

tok=ops-token-Kq7secret tok2=ops-token-2-Zr9secret marker=BODYMARKERx81
# The gateway logs in as its documented role, idem_app, granted its own tables.
db=$(newdb main)
as_role "$db" idem_app
q "$db" "CREATE SCHEMA app; GRANT USAGE ON SCHEMA app TO PUBLIC;
    CREATE TABLE app.notes (note_id bigserial PRIMARY KEY, tenant text NOT NULL,
                            text text NOT NULL, operation_id text NOT NULL);
    CREATE TABLE app.slots (id int PRIMARY KEY, n int NOT NULL); INSERT INTO app.slots VALUES (1, 0);
    GRANT SELECT, INSERT, UPDATE ON app.notes, app.slots TO $role_user;
    GRANT USAGE ON ALL SEQUENCES IN SCHEMA app TO $role_user" >/dev/null

upstream plain
up=$upstream_port
curl -sS -X POST "http://127.0.0.1:$up/_script" \
    -d '{"path": "/v1/hang", "actions": ["hang"], "honour": true}' >/dev/null

# config FILE HTTP-EXTRA TOKENS [TOOLS-EXTRA]: a configuration; HTTP-EXTRA are members of
# "http", TOKENS the tenant's tokens (digests made here).
config() {
    local digests="" t
    for t in $3; do digests+="${digests:+, }\"$(printf '%s' "$t" | "$gateway" hash-token)\""; done
    cat >"$1" <<JSON
{
  "http": {"address": "127.0.0.1", "port": 0, "max_body_bytes": 65536 $2},
  "database": {"dsn": "$role_dsn", "deadline_ms": 60000, "pool_size": 10},
  "log": {"format": "json"},
  "tenants": {"acme": {"tokens": [$digests]}},
  "tools": {
    "create_note": {
      "arguments": {"type": "object", "properties": {"text": {"type": "string"}},
                    "required": ["text"], "additionalProperties": false},
      "sql": {"statement": "INSERT INTO app.notes (tenant, text, operation_id) VALUES (\$1, \$2, \$3) RETURNING json_build_object('note_id', note_id)",
              "params": ["\$tenant", "/text", "\$operation_id"]}
    },
    "send_hang": {
      "arguments": {"type": "object"},
      "http": {"url": "http://127.0.0.1:$up/v1/hang", "timeout_ms": 8000,
               "retry": {"max_attempts": 1}}
    }
    ${4:-}
  }
}
JSON
}
bump_tool=', "bump": {"arguments": {"type": "object"},
      "sql": {"statement": "UPDATE app.slots SET n = n + 1 WHERE id = 1 RETURNING json_build_object('"'n'"', n)"}}'

# start NAME CONFIG [ARGS]: a gateway in the background, its stderr in $scratch/NAME.log;
# sets $port and $gw_pid.
start() {
    "$gateway" --config "$2" "${@:3}" 2>>"$scratch/$1.log" &
    gw_pid=$!
    pids+=("$gw_pid")
    gateway_port "$scratch/$1.log" "$gw_pid"
}
call() { # call TOOL KEY JSON [TOKEN] [CURL-ARGS...]
    http -X POST "http://127.0.0.1:$port/v1/tools/$1" -H "Authorization: Bearer ${4:-$tok}" \
        -H "Idempotency-Key: $2" -H 'Content-Type: application/json' --data-binary "$3" "${@:5}"
}
hdr() { sed -n "s/^$1: \(.*\)\r$/\1/Ip" "$scratch/headers"; }
# metric 'NAME{LABELS}': its value in /metrics (0 when absent); the exposition is parsed
# line by line and every sample must be well formed.
metric() {
    curl -sS "http://127.0.0.1:$port/metrics" | python3 -c '
import re, sys
want, found = sys.argv[1], "0"
for line in sys.stdin:
    line = line.rstrip("\n")
    if line.startswith("#") or not line:
        continue
    m = re.fullmatch(r"([a-z_]+)(\{[a-z_]+=\"[^\"]*\"(,[a-z_]+=\"[^\"]*\")*\})? (\S+)", line)
    assert m, "malformed sample: " + line
    float(m.group(4))
    if m.group(1) + (m.group(2) or "") == want:
        found = m.group(4)
print(found if "." not in found or float(found) != int(float(found)) else int(float(found)))
' "$1"
}
is() { test "$1" = "$2" || { echo "    got '$1', expected '$2'" >&2; return 1; }; }

# ---------------------------------------------------------------------------------------
# --check-config of the new members: each refusal names its place (each one: the unit test
# gateway_config; here, that the command says it and exits 65).
good="$scratch/good.json"
config "$good" "" "$tok"
check check_config_good 0 "$gateway" --check-config "$good"
bad() { # bad NAME PYTHON POINTER-AND-REASON
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $2; json.dump(d, open(sys.argv[2], 'w'))" \
        "$good" "$scratch/$1.json"
    check "check_config_$1" 65 "$gateway" --check-config "$scratch/$1.json"
    expect "check_config_$1_names_it" err_contains "$3"
}
bad log_format 'd["log"]["format"] = "xml"' '/log/format: must be "plain" or "json"'
check log_format_option_bad 64 "$gateway" --config "$good" --log-format xml

# ---------------------------------------------------------------------------------------
# The endpoints, the log and the request ID, on gateway "main".
cfg="$scratch/main.json"
# request_timeout_s: a new connection that sends nothing is closed after it (the front),
# and the 1,000 idle connections below are held open for the whole of their part.
config "$cfg" ', "max_connections": 1100, "idle_timeout_s": 600, "request_timeout_s": 600' "$tok $tok2"
start main "$cfg"
http "http://127.0.0.1:$port/healthz"
expect healthz_200 is "$status" 200
http "http://127.0.0.1:$port/readyz"
expect readyz_200 is "$status" 200
http -X POST "http://127.0.0.1:$port/readyz"
expect readyz_post_405 is "$status" 405
expect ready_gauge is "$(metric idem_gateway_ready)" 1

for i in 1 2 3; do call create_note "m-$i" "{\"text\": \"$marker $i\"}"; done
call create_note m-1 "{\"text\": \"$marker 1\"}" "" -H 'X-Request-Id: req-replay-1'
expect replay_201 is "$status" 201
expect request_id_echoed is "$(hdr X-Request-Id)" req-replay-1
call create_note m-4 "{\"text\": \"$marker 4\"}" "" -H 'X-Request-Id: trace-me-4'
expect trace_id_stored is "$(q "$db" "SELECT trace_id FROM idem.operations WHERE operation_id = 'm-4'")" trace-me-4
call create_note m-5 "{\"text\": \"$marker 5\"}" "" -H "X-Request-Id: $(printf 'x%.0s' $(seq 1 200))"
expect long_request_id_replaced grep -qE '^[0-9a-f]{8}-[0-9a-f]{4}-7' <<<"$(hdr X-Request-Id)"
call create_note m-6 "{\"text\": \"$marker 6\"}" "" -H 'X-Request-Id: has space'
expect spaced_request_id_replaced grep -qE '^[0-9a-f]{8}-[0-9a-f]{4}-7' <<<"$(hdr X-Request-Id)"
call no_such_tool m-7 '{}'
expect unknown_tool_404 is "$status" 404
call create_note m-8 '{}' wrong-token
expect bad_token_401 is "$status" 401
http -X POST "http://127.0.0.1:$port/mcp" -H "Authorization: Bearer $tok" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    --data-binary '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "create_note", "arguments": {"text": "mcp"}, "_meta": {"idem/operation_id": "m-mcp-1"}}}'
expect mcp_call_200 is "$status" 200

expect metric_created is "$(metric 'idem_gateway_calls_total{tool="create_note",status="created"}')" 7
expect metric_replayed is "$(metric 'idem_gateway_calls_total{tool="create_note",status="replayed"}')" 1
expect metric_requests_201 is "$(metric 'idem_gateway_requests_total{tool="create_note",code="201"}')" 7
expect metric_requests_401 is "$(metric 'idem_gateway_requests_total{tool="create_note",code="401"}')" 1
expect metric_unknown_404 is "$(metric 'idem_gateway_requests_total{tool="(unknown)",code="404"}')" 1
expect metric_mcp_200 is "$(metric 'idem_gateway_requests_total{tool="create_note",code="200"}')" 1
expect metric_none_405 is "$(metric 'idem_gateway_requests_total{tool="(none)",code="405"}')" 1
expect metric_histogram_count is "$(metric 'idem_gateway_request_duration_seconds_count{tool="create_note"}')" 9
expect metric_histogram_inf is "$(metric 'idem_gateway_request_duration_seconds_bucket{tool="create_note",le="+Inf"}')" 9
expect metric_in_flight is "$(metric idem_gateway_calls_in_flight)" 0
expect metric_pool_size is "$(metric idem_gateway_pool_size)" 10
expect metric_build_info is "$(metric "idem_gateway_build_info{version=\"$("$gateway" --version | cut -d' ' -f2)\"}")" 1
expect metric_reloads_none is "$(metric 'idem_gateway_config_reloads_total{result="ok"}')" 0

# The log: a JSON object a line per request, no token, no body.
log="$scratch/main.log"
expect log_no_token bash -c "! grep -qF -e '$tok' -e '$tok2' -e wrong-token '$log'"
expect log_no_body bash -c "! grep -qF '$marker' '$log'"
expect log_request_line python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
r = [l for l in lines if l.get("id") == "trace-me-4"]
assert len(r) == 1 and r[0]["tenant"] == "acme" and r[0]["tool"] == "create_note" \
    and r[0]["key"] == "m-4" and r[0]["code"] == 201 and r[0]["status"] == "created" \
    and r[0]["seconds"] >= 0, r
assert any(l.get("key") == "m-mcp-1" and l["route"] == "mcp" for l in lines), lines
' "$log"

# ---------------------------------------------------------------------------------------
# Hostile clients: clear 4xx answers, and the gateway keeps serving.
check hostile 0 python3 "$here/gateway_clients.py" hostile "$port" "$tok"
echo "$out"
# The front's answers to a first head (a version not 1.x, a head too large, a header line
# without a colon, a request line that is not HTTP) are counted under no tool and logged
# like the others.
expect metric_own_505 is "$(metric 'idem_gateway_requests_total{tool="(none)",code="505"}')" 1
own=0
for code in 400 413 414 431; do
    own=$((own + $(metric "idem_gateway_requests_total{tool=\"(none)\",code=\"$code\"}")))
done
expect metric_own_4xx test "$own" -ge 3
# ... and a request libmicrohttpd ends with an error while the gateway reads it (a
# malformed chunked body) is that request's answer: one line, with its tool and key.
expect logged_bad_chunk_once python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
mine = [l for l in lines if l.get("key") == "bad-chunk"]
assert len(mine) == 1 and mine[0]["code"] == 400 and mine[0]["tool"] == "create_note" \
    and mine[0]["route"] == "call", mine
' "$log"
expect logged_own_505 python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
assert any(l.get("code") == 505 and l["route"] == "other" and l["tool"] == "(none)"
           and l["id"] for l in lines), lines
' "$log"

# 1,000 idle connections and a call hanging upstream for its full timeout (8 s), while 100
# calls of another tool complete.
curl -sS -o "$scratch/hang.body" -w '%{http_code}' -m 120 -X POST "http://127.0.0.1:$port/v1/tools/send_hang" \
    -H "Authorization: Bearer $tok" -H 'Idempotency-Key: hang-1' -H 'Content-Type: application/json' \
    -d '{}' >"$scratch/hang.status" &
hang=$!
check idle_connections 0 python3 "$here/gateway_clients.py" idle "$port" 1000 "$gw_pid" "$tok" 100
echo "$out"
wait "$hang"
expect hang_outcome_unknown is "$(cat "$scratch/hang.status")" 502
expect metric_upstream_timeout is "$(metric 'idem_gateway_upstream_total{tool="send_hang",outcome="timeout"}')" 1
expect metric_upstream_unknown is "$(metric 'idem_gateway_upstream_total{tool="send_hang",outcome="unknown"}')" 1
curl -s -m 5 -X POST "http://127.0.0.1:$up/_release" >/dev/null

# ---------------------------------------------------------------------------------------
# SIGHUP: a removed token is refused; an invalid file keeps the configuration in use.
config "$cfg" ', "max_connections": 1100, "idle_timeout_s": 601, "request_timeout_s": 600' "$tok"
kill -HUP "$gw_pid"
for _ in $(seq 1 300); do grep -q 'SIGHUP: reloaded' "$log" && break; sleep 0.1; done
expect reload_logged grep -q 'SIGHUP: reloaded tools, tenants and tokens; changed but in effect only after a restart: http.idle_timeout_s' "$log"
call create_note h-1 '{"text": "x"}' "$tok2"
expect removed_token_401 is "$status" 401
call create_note h-2 '{"text": "x"}'
expect kept_token_201 is "$status" 201
expect metric_reload_ok is "$(metric 'idem_gateway_config_reloads_total{result="ok"}')" 1
echo '{"http": {"port": "x"}}' >"$cfg"
kill -HUP "$gw_pid"
for _ in $(seq 1 300); do grep -q 'reload refused' "$log" && break; sleep 0.1; done
expect reload_refused_logged grep -q 'SIGHUP: reload refused, the configuration in use stays: .*/http/port: must be' "$log"
call create_note h-3 '{"text": "x"}'
expect old_config_serves is "$status" 201
expect metric_reload_failed is "$(metric 'idem_gateway_config_reloads_total{result="failed"}')" 1
expect metric_reload_last is "$(metric idem_gateway_config_last_reload_success)" 0
kill -TERM "$gw_pid"
wait "$gw_pid"
expect main_exit_0 is $? 0

# ---------------------------------------------------------------------------------------
# Limits on gateway "tight": the connection limit, and slow clients cut.
cfg="$scratch/tight.json"
config "$cfg" ', "max_connections": 5, "idle_timeout_s": 3, "request_timeout_s": 3' "$tok"
start tight "$cfg"
check connection_limit 0 python3 "$here/gateway_clients.py" limit "$port" 5
echo "$out"
expect metric_refused test "$(metric idem_gateway_connections_refused_total)" -ge 1
check slow_clients 0 python3 "$here/gateway_clients.py" slow "$port"
echo "$out"
expect slow_body_logged grep -q "a connection was cut: its request's body took longer than http.request_timeout_s" "$scratch/tight.log"
kill -TERM "$gw_pid"
wait "$gw_pid"

# ---------------------------------------------------------------------------------------
# SIGTERM with calls parked on a row lock: the configuration they started with is
# reloaded away under them (the tool removed), the lock released within the grace period:
# every call gets its answer, and the gateway exits 0.
cfg="$scratch/drain.json"
config "$cfg" ', "shutdown_grace_s": 120' "$tok" "$bump_tool"
start drain "$cfg"
hold "$db" "BEGIN; SELECT n FROM app.slots WHERE id = 1 FOR UPDATE;" \
    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'slots' AND l.mode = 'RowShareLock' AND l.granted"
parked=()
for i in 1 2 3 4 5 6; do
    curl -sS -o /dev/null -w '%{http_code}\n' -m 120 -X POST "http://127.0.0.1:$port/v1/tools/bump" \
        -H "Authorization: Bearer $tok" -H "Idempotency-Key: park-$i" \
        -H 'Content-Type: application/json' -d '{}' >"$scratch/park-$i" 7>&- &
    parked+=($!)
done
for _ in $(seq 1 600); do [ "$(metric idem_gateway_calls_in_flight)" = 6 ] && break; sleep 0.1; done
expect six_parked is "$(metric idem_gateway_calls_in_flight)" 6
config "$cfg" ', "shutdown_grace_s": 120' "$tok"
kill -HUP "$gw_pid"
for _ in $(seq 1 300); do grep -q 'SIGHUP: reloaded' "$scratch/drain.log" && break; sleep 0.1; done
call bump after-reload '{}'
expect removed_tool_404 is "$status" 404
kill -TERM "$gw_pid"
for _ in $(seq 1 300); do grep -q 'SIGTERM: stopping' "$scratch/drain.log" && break; sleep 0.1; done
sleep 1
expect still_running kill -0 "$gw_pid"
release_lock
for p in "${parked[@]}"; do wait "$p"; done
expect parked_all_201 is "$(cat "$scratch"/park-* | sort | uniq -c | awk '{print $1 "x" $2}')" 6x201
wait "$gw_pid"
expect drain_exit_0 is $? 0
expect bumped_six is "$(q "$db" "SELECT n FROM app.slots WHERE id = 1")" 6
pids=("${pids[0]}")

# ---------------------------------------------------------------------------------------
# SIGTERM with a call parked on a row lock past the grace period: the gateway exits 75
# without its answer, saying so; the call commits or rolls back whole (its record and its
# write together), and its retry on a new gateway finds what it did.
cfg="$scratch/grace.json"
config "$cfg" ', "shutdown_grace_s": 1' "$tok" "$bump_tool"
start grace "$cfg"
before=$(q "$db" "SELECT n FROM app.slots WHERE id = 1")
hold "$db" "BEGIN; SELECT n FROM app.slots WHERE id = 1 FOR UPDATE;" \
    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'slots' AND l.mode = 'RowShareLock' AND l.granted"
curl -sS -o /dev/null -w '%{http_code}\n' -m 120 -X POST "http://127.0.0.1:$port/v1/tools/bump" \
    -H "Authorization: Bearer $tok" -H "Idempotency-Key: outlived" \
    -H 'Content-Type: application/json' -d '{}' >"$scratch/outlived" 2>/dev/null 7>&- &
outlived=$!
for _ in $(seq 1 600); do [ "$(metric idem_gateway_calls_in_flight)" = 1 ] && break; sleep 0.1; done
expect one_parked is "$(metric idem_gateway_calls_in_flight)" 1
kill -TERM "$gw_pid"
wait "$gw_pid"
expect grace_ran_out_exit_75 is $? 75
expect grace_ran_out_said grep -q "1 request still under way after http.shutdown_grace_s (1 s): exiting" \
    "$scratch/grace.log"
wait "$outlived"
expect outlived_no_answer is "$(cat "$scratch/outlived")" 000
release_lock
# The call's backend goes on once the lock is free; wait until it has finished.
for _ in $(seq 1 300); do
    [ "$(q "$db" "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'idem-gateway' AND state <> 'idle'")" = 0 ] && break
    sleep 0.1
done
kept=$(q "$db" "SELECT count(*) FROM idem.operations WHERE tenant = 'acme' AND operation_id = 'outlived'")
expect outlived_whole is "$(( $(q "$db" "SELECT n FROM app.slots WHERE id = 1") - before ))" "$kept"
start grace_retry "$cfg"
call bump outlived '{}'
expect outlived_retry_201 is "$status" 201
expect outlived_retry_once is "$(( $(q "$db" "SELECT n FROM app.slots WHERE id = 1") - before ))" 1
kill -TERM "$gw_pid"
wait "$gw_pid"
pids=("${pids[0]}")

[ "$failures" = 0 ] || tail -n 40 "$scratch"/*.log >&2
finish
