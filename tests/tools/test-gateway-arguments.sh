#!/usr/bin/env bash
# test-gateway-arguments.sh IDEM-GATEWAY IDEM-MIGRATE: the same argument bytes over the HTTP
# API, MCP over Streamable HTTP and MCP over stdio (gateway_arguments.py): one verdict per
# number on every transport (I-JSON read from the bytes the client sent, never a parser's
# rounding), the place of a refused value as a JSON Pointer, one fingerprint for the same
# bytes whatever the transport, and the operation ID argument taken out of the bytes.
# IDEM-GATEWAY is "" when the gateway is not built (skip).
set -uo pipefail
gateway=$1 migrate=$2 prefix=gwargs
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/gateway.sh"
gateway_required "libmicrohttpd, libcurl"

token=acme-arguments-token-1
db=$(newdb main)
login_role idem_test_gateway idem_app
q "$db" "CREATE SCHEMA app;
    CREATE TABLE app.records (id bigserial PRIMARY KEY, tenant text NOT NULL, n text,
        label text, operation_id text NOT NULL);
    GRANT USAGE ON SCHEMA app TO idem_test_gateway;
    GRANT SELECT, INSERT ON app.records TO idem_test_gateway;
    GRANT USAGE ON ALL SEQUENCES IN SCHEMA app TO idem_test_gateway" >/dev/null
cfg="$scratch/gateway.json"
statement="INSERT INTO app.records (tenant, n, label, operation_id) VALUES (\$1, \$2, \$3, \$4) RETURNING json_build_object('record_id', id)"
cat >"$cfg" <<JSON
{
  "http": {"address": "127.0.0.1", "port": 0, "max_body_bytes": 65536, "retry_after_s": 1},
  "database": {"dsn": "dbname=$db user=idem_test_gateway", "pool_size": 4,
               "acquire_timeout_ms": 120000, "deadline_ms": 120000},
  "tenants": {"acme": {"tokens": ["$(printf '%s' "$token" | "$gateway" hash-token)"]}},
  "mcp": {"stdio_tenant": "acme", "stdio_grace_s": 60},
  "tools": {
    "record": {
      "arguments": {"type": "object"},
      "sql": {"statement": "$statement", "params": ["\$tenant", "/n", "/label", "\$operation_id"]}
    },
    "record_with_id": {
      "operation_id_argument": "operation_id",
      "arguments": {"type": "object"},
      "sql": {"statement": "$statement", "params": ["\$tenant", "/n", "/label", "\$operation_id"]}
    }
  }
}
JSON
"$gateway" --config "$cfg" 2>"$scratch/gateway.log" &
gw_pid=$!
pids+=("$gw_pid")
gateway_port "$scratch/gateway.log" "$gw_pid"

rows_before=$(q "$db" "SELECT count(*) FROM app.records")
out=$(python3 "$(dirname "$0")/gateway_arguments.py" "$gateway" "$cfg" "$port" "$token" 2>"$scratch/py.err")
rc=$?
grep '^FAIL ' <<<"$out" >&2
n=$((n + $(grep -c '^ok \|^FAIL ' <<<"$out")))
failures=$((failures + $(grep -c '^FAIL ' <<<"$out")))
if [ "$rc" != 0 ] && ! grep -q '^FAIL ' <<<"$out"; then
    sed 's/^/    /' "$scratch/py.err" >&2
    failures=$((failures + 1))
fi
# What was created: one row per created call (9 numbers' accepted ones on 3 transports:
# 4 x 3; then the replays' firsts: 2, the 1 / 1.0 key: 1, the argument ID: 1), and nothing
# for a refusal.
expect rows_only_for_created test "$(q "$db" "SELECT count(*) - $rows_before FROM app.records")" = 16
expect operations_match_rows test "$(q "$db" "SELECT count(*) FROM idem.operations")" = \
    "$(q "$db" "SELECT count(*) FROM app.records")"
no_report() { ! grep -q 'Sanitizer\|runtime error:' "$1"; }
expect no_sanitizer_report no_report "$scratch/gateway.log"
if [ "$failures" != 0 ]; then
    echo "the gateway's log:" >&2
    tail -40 "$scratch/gateway.log" | sed 's/^/    /' >&2
fi
finish
