#!/usr/bin/env bash
# test-gateway-contract.sh IDEM-GATEWAY IDEM-MIGRATE GATEWAY-ANSWERS SRC-DIR WORK-DIR: the
# contract, machine-readable (tools/idem-gateway/README.md): a gateway serving four tools
# (sql and http, different windows, identity policies and operation ID channels) answers
# GET /v1/openapi.json with the token only, and SRC-DIR/check.mjs holds the document to
# OpenAPI 3.1 (@seriousme/openapi-schema-validator, pinned by SRC-DIR's package-lock.json
# and installed with npm ci into WORK-DIR), to the configuration, to the answer table
# (GATEWAY-ANSWERS) and to the contracts of GET /v1/tools and MCP's tools/list; then again
# after SIGHUP with a configuration whose windows, identity and operation ID argument
# changed, each of which the contracts must show. Skipped (77), saying so, when node or the
# validator cannot be had, unless IDEM_CI=1 (.ci/run), where that fails the test; and when
# the gateway is not built.
set -uo pipefail
gateway=$1 migrate=$2 answers=$3 src=$4 work=$5 prefix=gwcontract
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/gateway.sh"
. "$(dirname "$0")/need.sh"

gateway_required "libmicrohttpd and libcurl"
npm_ci "$src" "$work" "@seriousme/openapi-schema-validator" "$src"/*.mjs

token=acme-contract-token
db=$(newdb main)
login_role idem_test_gateway idem_app
q "$db" "CREATE SCHEMA app;
    CREATE TABLE app.notes (id bigserial PRIMARY KEY, tenant text NOT NULL, text text NOT NULL,
        operation_id text NOT NULL);
    GRANT USAGE ON SCHEMA app TO idem_test_gateway;
    GRANT SELECT, INSERT ON app.notes TO idem_test_gateway;
    GRANT USAGE ON ALL SEQUENCES IN SCHEMA app TO idem_test_gateway" >/dev/null
"$answers" >"$scratch/answers.json" || exit 1
cfg="$scratch/gateway.json"
cat >"$cfg" <<JSON
{
  "http": {"address": "127.0.0.1", "port": 0},
  "database": {"dsn": "dbname=$db user=idem_test_gateway", "clock_skew_s": 120},
  "tenants": {"acme": {"tokens": ["$(printf '%s' "$token" | "$gateway" hash-token)"]}},
  "tools": {
    "create_note": {
      "title": "Create a note", "description": "Adds a note to the tenant's notes.",
      "retention_s": 3600, "key_memory_s": 86400,
      "arguments": {"type": "object", "required": ["text"], "additionalProperties": false,
        "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 200},
                       "requested_at": {"type": "string"},
                       "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}}},
      "identity": {"except": ["/requested_at"]},
      "sql": {"statement": "INSERT INTO app.notes (tenant, text, operation_id) VALUES (\$1, \$2, \$3) RETURNING json_build_object('note_id', id)",
              "params": ["\$tenant", "/text", "\$operation_id"]}
    },
    "add_note": {
      "operation_id_argument": "operation_id", "retention_s": 5000000,
      "arguments": {"type": "object", "required": ["text"],
        "properties": {"text": {"type": "string"}, "n": {"type": "integer", "minimum": 0}}},
      "sql": {"statement": "INSERT INTO app.notes (tenant, text, operation_id) VALUES (\$1, \$2, \$3) RETURNING json_build_object('note_id', id)",
              "params": ["\$tenant", "/text", "\$operation_id"]}
    },
    "send_email": {
      "key_memory_s": 31536000,
      "arguments": {"type": "object", "required": ["to"],
        "properties": {"to": {"type": "string", "minLength": 3}, "subject": {"type": "string"}}},
      "identity": {"only": ["/to"]},
      "http": {"url": "http://127.0.0.1:9/v1/messages", "statuses": {"409": "final", "404": "transient", "500": "final"}}
    },
    "ping_service": {
      "arguments": {"type": "object", "properties": {"id": {"type": "string"}}},
      "http": {"method": "GET", "url": "http://127.0.0.1:9/v1/things/{/id}"}
    }
  }
}
JSON
check check_config 0 "$gateway" --check-config "$cfg"

log="$scratch/gateway.log"
"$gateway" --config "$cfg" </dev/null 2>"$log" &
gw_pid=$!
pids+=("$gw_pid")
gateway_port "$log" "$gw_pid"
base="http://127.0.0.1:$port"

# The document needs the token, like the tool list; GET only.
http "$base/v1/openapi.json"
expect openapi_without_token_401 test "$status" = 401
expect openapi_without_token_problem grep -q 'urn:idem:problem:unauthorized' "$scratch/body"
http -X POST -H "Authorization: Bearer $token" "$base/v1/openapi.json"
expect openapi_post_405 test "$status" = 405
expect openapi_post_allow grep -qi '^Allow: GET' "$scratch/headers"
http -H "Authorization: Bearer $token" "$base/v1/openapi.json"
expect openapi_200 test "$status" = 200
expect openapi_json grep -qi '^Content-Type: application/json' "$scratch/headers"
cp "$scratch/body" "$scratch/openapi-1.json"

started=$(date +%s%N)
check contract_checks 0 node "$work/check.mjs" "$base" "$token" "$cfg" "$scratch/answers.json"
echo "$out"
echo "check.mjs took $(( ($(date +%s%N) - started) / 1000000 )) ms"

# A changed configuration: the contracts follow it once SIGHUP has applied it.
edited_config "$cfg" "$scratch/changed.json" '
t = d["tools"]
t["create_note"]["retention_s"] = 7200
del t["create_note"]["identity"]
t["create_note"]["operation_id_argument"] = "op_id"
del t["add_note"]["operation_id_argument"]
t["add_note"]["key_memory_s"] = 6000000
t["send_email"]["http"]["statuses"] = {"404": "final", "403": "transient"}'
cp "$scratch/changed.json" "$cfg"
kill -HUP "$gw_pid"
for _ in $(seq 1 600); do grep -q 'SIGHUP: reloaded' "$log" && break; sleep 0.1; done
expect reload_applied grep -q 'SIGHUP: reloaded' "$log"
check contract_checks_after_reload 0 node "$work/check.mjs" "$base" "$token" "$cfg" "$scratch/answers.json"
echo "$out"

# The reloaded contracts differ from the first ones exactly where the file changed.
http -H "Authorization: Bearer $token" "$base/v1/openapi.json"
cp "$scratch/body" "$scratch/openapi-2.json"
check contracts_changed 0 python3 - "$scratch/openapi-1.json" "$scratch/openapi-2.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
c = lambda d, t: d["paths"]["/v1/tools/" + t]["post"]["x-idem-contract"]
changed = {t: sorted(k for k in c(a, t) if c(a, t)[k] != c(b, t)[k]) for t in
           ("create_note", "add_note", "send_email", "ping_service")}
want = {"create_note": ["identity", "key", "retention"], "add_note": ["key", "key_memory"],
        "send_email": [], "ping_service": []}
assert changed == want, changed
assert c(b, "create_note")["retention"]["seconds"] == 7200
assert {"argument": "op_id"} in c(b, "create_note")["key"]["mcp"]
PY
[ -n "$out$err" ] && echo "$out$err"

finish
