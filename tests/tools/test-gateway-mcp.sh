#!/usr/bin/env bash
# test-gateway-mcp.sh IDEM-GATEWAY IDEM-MIGRATE IDEM-FINGERPRINT MCP-DIR WORK-DIR: the
# gateway's tools over the Model Context Protocol, driven by the official TypeScript SDK
# (@modelcontextprotocol/sdk, pinned by MCP-DIR's package-lock.json and installed with npm
# ci into WORK-DIR) over Streamable HTTP (/mcp) and stdio (--stdio): MCP-DIR/client.mjs;
# hostile JSON-RPC over both, the raw initialize of 2025-06-18 and the end of stdin:
# MCP-DIR/raw.mjs; revision 2026-07-28 with the SDK's v2 client (@modelcontextprotocol/client,
# server/discover first, no session, a call whose connection closes replayed once, trace
# context in the log line): MCP-DIR/modern.mjs; then calls per second through MCP and
# through the HTTP API, printed
# (MCP-DIR/bench.mjs; measured, not asserted; IDEM_MCP_BENCH_CALLS calls each, 300 by
# default). Skipped (77), saying so, when node or the SDK cannot be had, unless IDEM_CI=1
# (.ci/run), where that fails the test; and when the gateway is not built.
set -uo pipefail
gateway=$1 migrate=$2 fingerprint=$3 src=$4 work=$5 prefix=gwmcp
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/gateway.sh"
. "$(dirname "$0")/need.sh"

if [ -z "$gateway" ] || [ ! -x "$gateway" ]; then
    echo "SKIPPED: idem-gateway is not built (meson option gateway; needs libmicrohttpd)" >&2
    exit 77
fi
npm_ci "$src" "$work" "the MCP SDK's clients" "$src"/*.mjs

pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$scratch"
}
trap cleanup EXIT

hash() { printf '%s' "$1" | "$gateway" hash-token; }
token=acme-mcp-token-1

db=$(newdb main)
login_role idem_test_gateway idem_app
q "$db" "CREATE SCHEMA app;
    CREATE TABLE app.notes (id bigserial PRIMARY KEY, tenant text NOT NULL, text text NOT NULL,
        operation_id text NOT NULL);
    CREATE TABLE app.counters (id int PRIMARY KEY, n int NOT NULL);
    INSERT INTO app.counters VALUES (1, 0);
    GRANT USAGE ON SCHEMA app TO idem_test_gateway;
    GRANT SELECT, INSERT, UPDATE ON app.notes, app.counters TO idem_test_gateway;
    GRANT USAGE ON ALL SEQUENCES IN SCHEMA app TO idem_test_gateway" >/dev/null
cfg="$scratch/gateway.json"
cat >"$cfg" <<JSON
{
  "http": {"address": "127.0.0.1", "port": 0, "max_body_bytes": 65536, "retry_after_s": 1},
  "database": {"dsn": "dbname=$db user=idem_test_gateway", "pool_size": 10,
               "acquire_timeout_ms": 120000, "deadline_ms": 120000},
  "tenants": {"acme": {"tokens": ["$(hash $token)"]}},
  "mcp": {"allowed_origins": ["https://allowed.example"], "stdio_tenant": "acme",
          "stdio_grace_s": 60},
  "tools": {
    "create_note": {
      "title": "Create a note", "description": "Adds a note to the tenant's notes.",
      "destructive": false,
      "arguments": {"type": "object", "required": ["text"], "additionalProperties": false,
        "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 200},
                       "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}}},
      "sql": {"statement": "INSERT INTO app.notes (tenant, text, operation_id) VALUES (\$1, \$2, \$3) RETURNING json_build_object('note_id', id, 'text', text)",
              "params": ["\$tenant", "/text", "\$operation_id"]}
    },
    "add_note": {
      "description": "Adds a note; the operation ID is an argument.",
      "operation_id_argument": "operation_id",
      "arguments": {"type": "object", "required": ["text"], "additionalProperties": false,
        "properties": {"text": {"type": "string"}}},
      "sql": {"statement": "INSERT INTO app.notes (tenant, text, operation_id) VALUES (\$1, \$2, \$3) RETURNING json_build_object('note_id', id)",
              "params": ["\$tenant", "/text", "\$operation_id"]}
    },
    "divide": {
      "arguments": {"type": "object", "properties": {"d": {"type": "integer"}}},
      "sql": {"statement": "SELECT json_build_object('q', 10 / \$1::int)", "params": ["/d"]}
    },
    "bump": {
      "arguments": {"type": "object", "required": ["by"],
                    "properties": {"by": {"type": "integer", "minimum": 1, "maximum": 10}}},
      "sql": {"statement": "UPDATE app.counters SET n = n + \$1::int WHERE id = 1 RETURNING json_build_object('n', n)",
              "params": ["/by"]}
    }
  }
}
JSON
check check_config 0 "$gateway" --check-config "$cfg"

# broken NAME PYTHON-EDIT WANT: the configuration changed by PYTHON-EDIT (on d) is refused
# with 65, the message containing WANT.
broken() {
    edited_config "$cfg" "$scratch/$1.json" "$2"
    check "check_config_$1" 65 "$gateway" --check-config "$scratch/$1.json"
    expect "check_config_$1_names_it" err_contains "$3"
}
broken operation_id_argument_declared 'd["tools"]["add_note"]["operation_id_argument"] = "text"' \
    '/tools/add_note/operation_id_argument: "text" is one of the schema'"'"'s properties'
broken destructive_not_boolean 'd["tools"]["bump"]["destructive"] = "yes"' \
    '/tools/bump/destructive: must be true or false'
broken title_not_string 'd["tools"]["bump"]["title"] = 5' '/tools/bump/title: must be a string'
broken stdio_tenant_unknown 'd["mcp"]["stdio_tenant"] = "nobody"' \
    '/mcp/stdio_tenant: "nobody" is not one of the tenants'
broken origin_not_string 'd["mcp"]["allowed_origins"] = ["https://a.example", 5]' \
    '/mcp/allowed_origins/1: must be an origin'
broken mcp_unknown_member 'd["mcp"]["session"] = True' '/mcp/session: unknown member'
broken grace_too_long 'd["mcp"]["stdio_grace_s"] = 3601' '/mcp/stdio_grace_s: must be a whole number'
check stdio_needs_config 64 "$gateway" --stdio
python3 -c "import json, sys; d = json.load(open(sys.argv[1])); del d['mcp']['stdio_tenant']; json.dump(d, open(sys.argv[2], 'w'))" \
    "$cfg" "$scratch/no-tenant.json"
check stdio_needs_tenant 65 "$gateway" --stdio --config "$scratch/no-tenant.json"
expect stdio_needs_tenant_says err_contains '/mcp/stdio_tenant: is required with --stdio'

# An operation left pending past the deadline, as an interrupted effect leaves it: every
# later call on it is outcome_unknown. One per transport.
pending() {
    local fp
    fp=$(printf '{"by": 1}' | "$fingerprint" --tool bump --payload-version 1)
    q "$db" "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,
        state, claim_token, expires_at, forget_at, created_at) VALUES ('acme', '$1', 'bump', 1,
        decode('$fp', 'hex'), 'pending', gen_random_uuid(), now() + interval '1 hour',
        now() + interval '1 day', now() - interval '1 day')" >/dev/null
}
pending http-unknown-1
pending stdio-unknown-1

"$gateway" --config "$cfg" 2>"$scratch/gateway.log" &
gw_pid=$!
pids+=("$gw_pid")
gateway_port "$scratch/gateway.log" "$gw_pid"

# node SCRIPT ARGS...: its "ok"/"FAIL" lines counted as checks.
run_node() {
    local out rc
    out=$(cd "$work" && DB="$db" node "$@" 2>"$scratch/node.err")
    rc=$?
    echo "$out" | grep -v '^ok '
    n=$((n + $(grep -c '^ok \|^FAIL ' <<<"$out")))
    failures=$((failures + $(grep -c '^FAIL ' <<<"$out")))
    if [ "$rc" != 0 ]; then
        sed 's/^/    stderr: /' "$scratch/node.err" | tail -30 >&2
        grep -q '^FAIL ' <<<"$out" || failures=$((failures + 1))
    fi
    # The stdio gateways the SDK starts write their standard error there: under ASan, a
    # report of theirs fails the test.
    n=$((n + 1))
    if grep -q 'Sanitizer\|runtime error:' "$scratch/node.err"; then
        echo "FAIL: $1: a gateway's sanitizer report:" >&2
        grep -A30 'Sanitizer\|runtime error:' "$scratch/node.err" | head -60 >&2
        failures=$((failures + 1))
    fi
}

url="http://127.0.0.1:$port/mcp"
OU_KEY=http-unknown-1 TRANSCRIPT="$work/transcript.json" run_node client.mjs http "$url" "$token"
OU_KEY=stdio-unknown-1 run_node client.mjs stdio "$gateway" "$cfg"
run_node raw.mjs "$url" "$token" "$gateway" "$cfg"
GATEWAY_LOG="$scratch/gateway.log" run_node modern.mjs "$url" "$token" "$gateway" "$cfg"
expect gateway_still_serving kill -0 "$gw_pid"
run_node bench.mjs "$port" "$token" "${IDEM_MCP_BENCH_CALLS:-300}"

kill -TERM "$gw_pid"
wait "$gw_pid"
expect sigterm_exit_0 test $? = 0
no_report() { ! grep -q 'Sanitizer\|runtime error:' "$1"; }
expect no_sanitizer_report no_report "$scratch/gateway.log"
pids=()
if [ "$failures" != 0 ]; then
    echo "the gateway's log:" >&2
    tail -40 "$scratch/gateway.log" | sed 's/^/    /' >&2
fi
finish
