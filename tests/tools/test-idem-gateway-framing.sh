#!/usr/bin/env bash
# test-idem-gateway-framing.sh IDEM-GATEWAY IDEM-MIGRATE: idem-gateway's message framing
# (RFC 9112 section 6) against the server of tools/with-postgres, over raw sockets
# (gateway_framing.py): conflicting or invalid Content-Length, Transfer-Encoding other
# than chunked, both at once, a request line that is not HTTP; each gets its exact status
# line and problem in one well-formed answer, nothing runs (no row of the tool's, no
# operation), and each answer is counted and logged. Also: the request log names the tenant of every authenticated route.
# IDEM-GATEWAY is "" when it is not built (skip).
set -uo pipefail
gateway=$1 migrate=$2 prefix=gwf
here=$(dirname "$0")
. "$here/common.sh"
. "$here/gateway.sh"
gateway_required "libmicrohttpd, libcurl"

tok=framing-token-Pq4secret
db=$(newdb main)
q "$db" "CREATE SCHEMA app; GRANT USAGE ON SCHEMA app TO PUBLIC;
    CREATE TABLE app.notes (note_id bigserial PRIMARY KEY, tenant text NOT NULL,
                            text text NOT NULL, operation_id text NOT NULL)"
cfg="$scratch/framing.json"
cat >"$cfg" <<JSON
{
  "http": {"address": "127.0.0.1", "port": 0, "max_body_bytes": 65536},
  "database": {"dsn": "dbname=$db", "deadline_ms": 60000, "pool_size": 4},
  "log": {"format": "json"},
  "tenants": {"acme": {"tokens": ["$(printf '%s' "$tok" | "$gateway" hash-token)"]}},
  "tools": {
    "create_note": {
      "arguments": {"type": "object", "properties": {"text": {"type": "string"}},
                    "required": ["text"], "additionalProperties": false},
      "sql": {"statement": "INSERT INTO app.notes (tenant, text, operation_id) VALUES (\$1, \$2, \$3) RETURNING json_build_object('note_id', note_id)",
              "params": ["\$tenant", "/text", "\$operation_id"]}
    }
  }
}
JSON
log="$scratch/gateway.log"
"$gateway" --config "$cfg" 2>>"$log" &
gw_pid=$!
pids+=("$gw_pid")
gateway_port "$log" "$gw_pid"
metric() { # metric 'NAME{LABELS}': its value in /metrics, 0 when absent
    curl -sS "http://127.0.0.1:$port/metrics" | awk -v want="$1" '$1 == want {v = $2} END {print v + 0}'
}
is() { test "$1" = "$2" || { echo "    got '$1', expected '$2'" >&2; return 1; }; }

# ---------------------------------------------------------------------------------------
# Unsound framing: the exact status line, and nothing written.
check framing 0 python3 "$here/gateway_framing.py" "$port" "$tok"
echo "$out"
expect no_operation_written is "$(q "$db" "SELECT count(*) FROM idem.operations WHERE operation_id LIKE 'frame-%'")" 0
expect no_note_written is "$(q "$db" "SELECT count(*) FROM app.notes WHERE operation_id LIKE 'frame-%'")" 0
expect sound_framing_written is "$(q "$db" "SELECT string_agg(operation_id, ' ' ORDER BY operation_id) FROM app.notes WHERE operation_id NOT LIKE 'alive-%'")" "good-chunked good-cl"
# One kept-alive connection's requests, each with its own body only.
expect kept_alive_written is "$(q "$db" "SELECT string_agg(operation_id || ':' || length(text), ' ' ORDER BY operation_id) FROM app.notes WHERE operation_id LIKE 'alive-%'")" "alive-1:6000 alive-2:12000 alive-3:1"
expect operations_sound_only is "$(q "$db" "SELECT count(*) FROM idem.operations")" 5
kill -0 "$gw_pid"
expect still_serving is $? 0

# Each of the gateway's framing answers counted under no tool and logged, with its route.
expect metric_framing_501 is "$(metric 'idem_gateway_requests_total{tool="(none)",code="501"}')" 4
expect metric_framing_400 is "$(metric 'idem_gateway_requests_total{tool="(none)",code="400"}')" 19
expect logged_framing python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
refused = [l for l in lines if l.get("msg") == "request" and l["code"] in (400, 501)
           and l["route"] == "other" and l["tool"] == "(none)" and l["tenant"] is None
           and l["key"] is None and l["id"]]
assert sum(l["code"] == 501 for l in refused) == 4, refused
assert sum(l["code"] == 400 for l in refused) == 19, refused
' "$log"

# ---------------------------------------------------------------------------------------
# The request log names the tenant on every authenticated route.
http "http://127.0.0.1:$port/v1/tools" -H "Authorization: Bearer $tok" -H 'X-Request-Id: list-1'
expect list_200 is "$status" 200
http -X POST "http://127.0.0.1:$port/v1/tools/create_note" -H "Authorization: Bearer $tok" \
    -H 'Idempotency-Key: logged-1' -H 'Content-Type: application/json' \
    -H 'X-Request-Id: call-1' --data-binary '{"text": "x"}'
expect call_201 is "$status" 201
http -X POST "http://127.0.0.1:$port/mcp" -H "Authorization: Bearer $tok" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'X-Request-Id: mcp-1' --data-binary '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
expect mcp_200 is "$status" 200
http "http://127.0.0.1:$port/v1/tools" -H 'X-Request-Id: list-anonymous'
expect list_anonymous_401 is "$status" 401
for _ in $(seq 1 100); do grep -q '"id":"list-anonymous"' "$log" && break; sleep 0.1; done
expect logged_tenants python3 -c '
import json, sys
lines = {l["id"]: l for l in map(json.loads, filter(lambda l: l.startswith("{"), open(sys.argv[1])))
         if l.get("msg") == "request"}
for id, route in (("list-1", "list"), ("call-1", "call"), ("mcp-1", "mcp")):
    assert lines[id]["tenant"] == "acme" and lines[id]["route"] == route, lines.get(id)
assert lines["list-anonymous"]["tenant"] is None and lines["list-anonymous"]["code"] == 401
' "$log"

# SIGTERM with a silent connection held by the front (counted open, no head yet): it is
# closed unanswered, and the gateway stops at once, not at the head's deadline (30 s).
exec 7<>"/dev/tcp/127.0.0.1/$port"
for _ in $(seq 1 300); do
    [ "$(metric idem_gateway_connections_open)" -ge 2 ] && break # curl's and the silent one
    sleep 0.1
done
expect silent_counted_open test "$(metric idem_gateway_connections_open)" -ge 2
started=$SECONDS
kill -TERM "$gw_pid"
wait "$gw_pid"
expect exit_0 is $? 0
expect stopped_at_once test $((SECONDS - started)) -lt 20
expect silent_closed_unanswered is "$(timeout 20 cat <&7 | wc -c)" 0
exec 7<&-
pids=()
[ "$failures" = 0 ] || tail -n 40 "$log" >&2
finish
