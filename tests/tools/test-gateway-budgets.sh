#!/usr/bin/env bash
# test-gateway-budgets.sh IDEM-GATEWAY IDEM-MIGRATE: per-tenant budgets against a real
# gateway and PostgreSQL: a tenant over its budget of new operations is answered 429
# rate_limited (problem rate-limited, Retry-After, the RateLimit fields) and nothing is
# written, while a retry of an operation it already has still replays; over its budget of
# calls every call is refused, over HTTP and as an MCP error result; another tenant is not
# touched; /metrics counts both per tenant. The rates are a token a minute, so that the
# test holds however slowly a loaded machine runs it.
# IDEM-GATEWAY is "" when the gateway is not built (skip).
set -uo pipefail
gateway=$1 migrate=$2 prefix=gwbudget
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/gateway.sh"
gateway_required "libmicrohttpd, libcurl"

acme=acme-budget-token-1 globex=globex-budget-token-1
db=$(newdb main)
login_role idem_test_gateway idem_app
q "$db" "CREATE SCHEMA app;
    CREATE TABLE app.notes (id bigserial PRIMARY KEY, tenant text NOT NULL, text text);
    GRANT USAGE ON SCHEMA app TO idem_test_gateway;
    GRANT SELECT, INSERT ON app.notes TO idem_test_gateway;
    GRANT USAGE ON ALL SEQUENCES IN SCHEMA app TO idem_test_gateway" >/dev/null
cfg="$scratch/gateway.json"
cat >"$cfg" <<JSON
{
  "http": {"address": "127.0.0.1", "port": 0},
  "database": {"dsn": "dbname=$db user=idem_test_gateway", "pool_size": 2,
               "acquire_timeout_ms": 120000, "deadline_ms": 120000},
  "tenants": {
    "acme": {"tokens": ["$(printf '%s' "$acme" | "$gateway" hash-token)"],
             "budget": {"calls": {"per_minute": 1, "burst": 3},
                        "new_operations": {"per_minute": 1, "burst": 2}}},
    "globex": {"tokens": ["$(printf '%s' "$globex" | "$gateway" hash-token)"]}
  },
  "tools": {
    "note": {
      "arguments": {"type": "object", "required": ["text"],
                    "properties": {"text": {"type": "string"}}},
      "sql": {"statement": "INSERT INTO app.notes (tenant, text) VALUES (\$1, \$2) RETURNING json_build_object('note_id', id)",
              "params": ["\$tenant", "/text"]}
    }
  }
}
JSON
"$gateway" --check-config "$cfg" >/dev/null 2>"$scratch/check.err"
expect check_config_accepts_budgets test $? = 0
"$gateway" --config "$cfg" 2>"$scratch/gateway.log" &
gw_pid=$!
pids+=("$gw_pid")
gateway_port "$scratch/gateway.log" "$gw_pid"

# call TOKEN KEY TEXT: POST /v1/tools/note
call() {
    http -X POST "http://127.0.0.1:$port/v1/tools/note" -H "Authorization: Bearer $1" \
        -H "Idempotency-Key: $2" -H 'Content-Type: application/json' -d "{\"text\": \"$3\"}"
}
header() { sed -n "s/^$1: \\(.*\\)\\r\$/\\1/Ip" "$scratch/headers"; }
member() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))" "$scratch/body" "$1"; }
notes() { q "$db" "SELECT count(*) FROM app.notes WHERE tenant = '$1'"; }

call "$acme" k1 one
expect first_call_created test "$status" = 201
expect rate_limit_policy_names_both_budgets test "$(header RateLimit-Policy)" = \
    '"calls";q=3;w=180, "new_operations";q=2;w=120'
expect rate_limit_tells_what_remains grep -q '^"calls";r=2;t=[0-9]*, "new_operations";r=1;t=[0-9]*$' \
    <(header RateLimit)
call "$acme" k2 two
expect second_call_created test "$status" = 201

# The budget of new operations is spent: a new key is refused, nothing runs.
call "$acme" k3 three
expect new_operation_over_budget_is_429 test "$status" = 429
expect its_problem_is_rate_limited test "$(member type)" = "urn:idem:problem:rate-limited"
expect its_problem_names_the_budget test "$(member budget)" = new_operations
expect its_idem_status_is_rate_limited test "$(header Idem-Status)" = rate_limited
retry=$(header Retry-After)
expect retry_after_is_when_a_token_is_back test "${retry:-0}" -ge 1 -a "${retry:-0}" -le 60
expect nothing_written_over_budget test "$(notes acme)" = 2

# A retry of an operation the tenant has creates nothing: it replays.
call "$acme" k1 one
expect retry_of_a_known_key_replays test "$status" = 201 -a "$(header Idempotent-Replayed)" = true

# Three calls taken (k1, k2, the replay; the refused one gave its call back): the budget
# of calls is spent, replays too are refused, over HTTP and MCP.
call "$acme" k2 two
expect replay_over_the_calls_budget_is_429 test "$status" = 429 -a "$(member budget)" = calls
http -X POST "http://127.0.0.1:$port/mcp" -H "Authorization: Bearer $acme" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "note",
         "_meta": {"idem/operation_id": "k4"}, "arguments": {"text": "four"}}}'
mcp_ok() {
    python3 - "$scratch/body" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["result"]
sc = r["structuredContent"]
assert r["isError"] is True, r
assert sc["status"] == "rate_limited" and sc["budget"] == "calls", sc
assert 1 <= sc["retry_after"] <= 60, sc
t = r["content"][0]["text"]
assert t.startswith("[rate_limited] ") and "k4" in t and "same operation ID" in t, t
PY
}
expect mcp_over_budget_is_an_error_result mcp_ok
expect still_nothing_written test "$(notes acme)" = 2

# Another tenant has no budget: nothing of acme's touches it.
call "$globex" k3 other
expect other_tenant_unaffected test "$status" = 201 -a -z "$(header RateLimit)"

http "http://127.0.0.1:$port/metrics"
expect metrics_count_refusals_per_tenant_and_budget \
    grep -q '^idem_gateway_budget_refused_total{tenant="acme",budget="new_operations"} 1$' "$scratch/body"
expect metrics_count_calls_refusals \
    grep -q '^idem_gateway_budget_refused_total{tenant="acme",budget="calls"} 2$' "$scratch/body"
expect metrics_count_tokens_taken \
    grep -q '^idem_gateway_budget_taken_total{tenant="acme",budget="calls"} 3$' "$scratch/body"
expect metrics_count_new_operations_taken \
    grep -q '^idem_gateway_budget_taken_total{tenant="acme",budget="new_operations"} 2$' "$scratch/body"
expect metrics_count_rate_limited_calls \
    grep -q '^idem_gateway_calls_total{tool="note",status="rate_limited"} 3$' "$scratch/body"

# A budget the configuration gets wrong is refused with its place.
edited_config "$cfg" "$scratch/bad.json" 'd["tenants"]["acme"]["budget"]["calls"]["burst"] = 0'
out=$("$gateway" --check-config "$scratch/bad.json" 2>&1)
expect bad_budget_refused_with_its_place contains '/tenants/acme/budget/calls/burst'
if [ "$failures" != 0 ]; then
    echo "the gateway's log:" >&2
    tail -40 "$scratch/gateway.log" | sed 's/^/    /' >&2
fi
finish
