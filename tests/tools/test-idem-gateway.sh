#!/usr/bin/env bash
# test-idem-gateway.sh IDEM-GATEWAY IDEM-MIGRATE IDEM-RECONCILE IDEM-FINGERPRINT: the
# gateway's HTTP contract against the server of tools/with-postgres, through real HTTP
# (curl) on a free loopback port: every row of its status table, the reply lost after
# commit, 32 concurrent identical requests, one key under two tenants; and --check-config,
# hash-token and the exit codes. IDEM-GATEWAY is "" when the gateway is not built (skip).
set -uo pipefail
gateway=$1 migrate=$2 reconcile=$3 fingerprint=$4 prefix=gw
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/gateway.sh"
gateway_required libmicrohttpd

pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    [ -n "${holder:-}" ] && kill "$holder" 2>/dev/null
    rm -rf "$scratch"
}
trap cleanup EXIT

hash() { printf '%s' "$1" | "$gateway" hash-token; }
tok_acme=acme-token-1 tok_acme2=acme-token-2 tok_beta=beta-token-1

# config FILE DSN DEADLINE_MS: the test's configuration.
config() {
    cat >"$1" <<JSON
{
  "http": {"address": "127.0.0.1", "port": 0, "max_body_bytes": 4096, "retry_after_s": 2},
  "database": {"dsn": "$2", "pool_size": 10, "acquire_timeout_ms": 120000,
               "deadline_ms": $3},
  "tenants": {
    "acme": {"tokens": ["$(hash $tok_acme)", "$(hash $tok_acme2)"]},
    "beta": {"tokens": ["$(hash $tok_beta)"]}
  },
  "tools": {
    "create_note": {
      "payload_version": 1, "retention_s": 3600, "key_memory_s": 86400,
      "arguments": {"type": "object", "required": ["text"], "additionalProperties": false,
        "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 200},
                       "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}}},
      "sql": {"statement": "INSERT INTO app.notes (tenant, text, operation_id) VALUES (\$1, \$2, \$3) RETURNING json_build_object('note_id', id, 'text', text)",
              "params": ["\$tenant", "/text", "\$operation_id"]}
    },
    "bump": {
      "arguments": {"type": "object", "required": ["by"],
                    "properties": {"by": {"type": "integer", "minimum": 1, "maximum": 10}}},
      "sql": {"statement": "UPDATE app.counters SET n = n + \$1::int WHERE id = 1 RETURNING json_build_object('n', n)",
              "params": ["/by"]}
    },
    "divide": {
      "arguments": {"type": "object", "properties": {"d": {"type": "integer"}}},
      "sql": {"statement": "SELECT json_build_object('q', 10 / \$1::int)", "params": ["/d"]}
    },
    "read_secret": {
      "arguments": {"type": "object", "additionalProperties": false},
      "sql": {"statement": "SELECT json_build_object('n', count(*)) FROM app.secrets"}
    },
    "log_visit": {
      "arguments": {"type": "object", "required": ["page"],
        "properties": {"page": {"type": "string"}, "requested_at": {"type": "string"},
                       "tags": {"type": "array", "items": {"type": "string"}}}},
      "identity": {"except": ["/requested_at"]},
      "sql": {"statement": "INSERT INTO app.notes (tenant, text, operation_id) VALUES (\$1, \$2, \$3) RETURNING json_build_object('note_id', id)",
              "params": ["\$tenant", "/page", "\$operation_id"]}
    }
  }
}
JSON
}

# start NAME CONFIG: a gateway in the background; sets $port, and $gw_pid.
start() {
    local log="$scratch/$1.log"
    "$gateway" --config "$2" 2>"$log" &
    gw_pid=$!
    pids+=("$gw_pid")
    gateway_port "$log" "$gw_pid"
}

# call TOOL TOKEN KEY JSON [CURL-ARGS...]
call() {
    local tool=$1 token=$2 key=$3 json=$4
    shift 4
    http -X POST "http://127.0.0.1:$port/v1/tools/$tool" -H "Authorization: Bearer $token" \
        -H "Idempotency-Key: $key" -H 'Content-Type: application/json' --data-binary "$json" "$@"
}
hdr() { sed -n "s/^$1: \(.*\)\r$/\1/Ip" "$scratch/headers"; }
type_is() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['type'] == 'urn:idem:problem:' + sys.argv[2] and d['status'] == int(sys.argv[3]), d" "$scratch/body" "$1" "$status"; }
field_is() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d$1 == sys.argv[2], d" "$scratch/body" "$2"; }
problem_json() { [ "$(hdr Content-Type)" = application/problem+json ]; }
# answer NAME STATUS [TYPE]: the last answer had STATUS (and the problem TYPE).
answer() {
    n=$((n + 1))
    if [ "$status" != "$2" ] || { [ -n "${3:-}" ] && ! { problem_json && type_is "$3" 2>/dev/null; }; }; then
        echo "FAIL: $1: HTTP $status, expected $2 ${3:-}; body: $body" >&2
        failures=$((failures + 1))
        return 1
    fi
}

# ---------------------------------------------------------------------------------------
# The command line: no server of its own needed.
check help 0 "$gateway" --help
expect help_lists_exit_codes contains "65  the configuration is not valid"
check version 0 "$gateway" --version
check usage_nothing 64 "$gateway"
check usage_both 64 "$gateway" --config a --check-config b
check usage_operand 64 "$gateway" --config a extra
check usage_hash_token_argument 64 "$gateway" hash-token secret
check hash_token 0 sh -c "printf 'abc\n' | '$gateway' hash-token"
expect hash_token_is_sha256 test "$out" = "$(printf abc | sha256sum | cut -d' ' -f1)"
check hash_token_bad 65 sh -c "printf 'two words\n' | '$gateway' hash-token"
check hash_token_empty 65 sh -c "printf '' | '$gateway' hash-token"

good="$scratch/good.json"
config "$good" "dbname=x" 10000
check check_config_good 0 "$gateway" --check-config "$good"
expect check_config_says_ok contains ": ok: 2 tenants, 5 tools"
check check_config_missing 66 "$gateway" --check-config "$scratch/none.json"
expect check_config_missing_says err_contains "cannot read"

# broken NAME PYTHON-EDIT WANT: the good file changed by PYTHON-EDIT (on d) is refused
# with 65, the message containing WANT.
broken() {
    edited_config "$good" "$scratch/$1.json" "$2"
    check "check_config_$1" 65 "$gateway" --check-config "$scratch/$1.json"
    expect "check_config_$1_names_it" err_contains "$3"
}
printf '{"tools": ' >"$scratch/notjson.json"
check check_config_not_json 65 "$gateway" --check-config "$scratch/notjson.json"
expect check_config_not_json_says err_contains "not valid JSON"
# Each refusal of the reader, by its place and reason: the unit test gateway_config
# (tests/unit/test_gateway_config.c); here, that the command says it and exits 65.
broken unknown_top 'd["extra"] = 1' '/extra: unknown member'

# ---------------------------------------------------------------------------------------
# The server, against a fresh database; the gateway logs in as an application role.
db=$(newdb main)
login_role idem_test_gateway idem_app
q "$db" "CREATE SCHEMA app;
    CREATE TABLE app.notes (id bigserial PRIMARY KEY, tenant text NOT NULL, text text NOT NULL,
        operation_id text NOT NULL);
    CREATE TABLE app.counters (id int PRIMARY KEY, n int NOT NULL);
    INSERT INTO app.counters VALUES (1, 0);
    CREATE TABLE app.secrets (id int);
    GRANT USAGE ON SCHEMA app TO idem_test_gateway;
    GRANT SELECT, INSERT, UPDATE ON app.notes, app.counters TO idem_test_gateway;
    GRANT USAGE ON ALL SEQUENCES IN SCHEMA app TO idem_test_gateway" >/dev/null

# No pool: the gateway says why once, in the library's words with the server's, and exits
# as every tool does: 75 when the server is unreachable (a later try may work), 78 when it
# refuses the login (the settings cannot work). Over stdio (before reading its input) and over HTTP alike.
create_role idem_test_password "LOGIN PASSWORD 'idem-test-password'"
once() { [ "$(grep -o 'cannot create the pool' <<<"$err" | wc -l)" = 1 ]; }
# no_pool NAME DSN EXIT REASON: the gateway on DSN, both ways, exits EXIT saying REASON.
no_pool() {
    config "$scratch/$1.json" "$2" 10000
    edited_config "$scratch/$1.json" "$scratch/$1.json" 'd["mcp"] = {"stdio_tenant": "acme"}'
    check "stdio_$1_exit" "$3" timeout 120 "$gateway" --stdio --config "$scratch/$1.json" </dev/null
    expect "stdio_$1_says_why" err_contains "$4"
    expect "stdio_$1_says_it_once" once
    check "http_$1_exit" "$3" timeout 120 "$gateway" --config "$scratch/$1.json" </dev/null
    expect "http_$1_says_why" err_contains "$4"
    expect "http_$1_says_it_once" once
}
no_pool unreachable "host=127.0.0.1 port=1 dbname=$db connect_timeout=60" 75 \
    'cannot create the pool: cannot connect: connection to server at "127.0.0.1", port 1 failed'
no_pool login_refused \
    "host=127.0.0.1 port=$PGPORT dbname=$db user=idem_test_password passfile=/nonexistent password=wrong" \
    78 'password authentication failed for user "idem_test_password"'

cfg="$scratch/gateway.json"
config "$cfg" "dbname=$db user=idem_test_gateway" 120000
start main "$cfg"
main_pid=$gw_pid main_port=$port
notes() { q "$db" "SELECT count(*) FROM app.notes WHERE operation_id = '$1'"; }
stored() { q "$db" "SELECT convert_from(response, 'UTF8') FROM idem.operations WHERE tenant = '$1' AND operation_id = '$2'"; }
# A declared receipt goes out canonical (the record keeps the server's text); these
# receipts hold ASCII and integers only, which Python writes as RFC 8785 does.
canonical() { python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1]), separators=(",", ":"), sort_keys=True))' "$1"; }

# /mcp as the manual says ("MCP", "Over HTTP"): a missing or unknown token gets the HTTP
# API's 401 (problem+json, the same bytes); Idempotency-Key is not read, so a call with
# the header and no operation ID runs nothing; an Origin not listed gets 403.
mcp() { # mcp JSON [CURL-ARGS...]: one message to /mcp
    local json=$1
    shift
    http -X POST "http://127.0.0.1:$port/mcp" -H 'Content-Type: application/json' \
        --data-binary "$json" "$@"
}
list='{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
mcp "$list"
answer mcp_no_token 401 unauthorized
no_token_body=$body
expect mcp_no_token_www_authenticate test "$(hdr WWW-Authenticate)" = 'Bearer realm="idem-gateway"'
mcp "$list" -H "Authorization: Bearer not-a-token"
answer mcp_unknown_token 401 unauthorized
expect mcp_unknown_token_same_bytes test "$body" = "$no_token_body"
mcp '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "create_note", "arguments": {"text": "header only"}}}' \
    -H "Authorization: Bearer $tok_acme" -H 'Idempotency-Key: mcp-header-1'
answer mcp_header_only 200
expect mcp_header_only_not_the_key field_is '["result"]["structuredContent"]["status"]' operation_id_required
expect mcp_header_only_ran_nothing test "$(notes mcp-header-1)" = 0
expect mcp_header_only_stored_nothing test -z "$(stored acme mcp-header-1)"
mcp "$list" -H "Authorization: Bearer $tok_acme" -H 'Origin: http://localhost:6274'
answer mcp_origin_not_listed 403

# created: 201, the receipt as the body.
call create_note $tok_acme note-1 '{"text": "hello"}'
answer created 201
expect created_body_is_the_receipt test "$body" = "$(canonical "$(stored acme note-1)")"
expect created_receipt_is_canonical test "$body" = '{"note_id":1,"text":"hello"}'
expect created_says_status test "$(hdr Idem-Status)" = created
expect created_names_the_operation test "$(hdr Idem-Operation-Id)" = note-1
expect created_not_replayed test -z "$(hdr Idempotent-Replayed)"
expect created_json test "$(hdr Content-Type)" = application/json
cp "$scratch/body" "$scratch/first"

# replayed: the original status, the same bytes, Idempotent-Replayed: true; the quoted
# form of the key is the same key; a rotated token of the same tenant too.
call create_note $tok_acme note-1 '{"text": "hello"}'
answer replayed 201
expect replayed_header test "$(hdr Idempotent-Replayed)" = true
expect replayed_says_status test "$(hdr Idem-Status)" = replayed
expect replayed_same_bytes cmp -s "$scratch/body" "$scratch/first"
call create_note $tok_acme2 '"note-1"' '{"text": "hello"}'
answer replayed_quoted_key_rotated_token 201
expect replayed_quoted_key_header test "$(hdr Idempotent-Replayed)" = true
expect replayed_quoted_same_bytes cmp -s "$scratch/body" "$scratch/first"
expect effect_ran_once test "$(notes note-1)" = 1

# A declared record written before migration 0013 (the server's text, receipt_canonical
# NULL) answered its first caller those bytes: the retry gets them again, spacing and all.
args='{"text": "from before"}'
fp=$(printf '%s' "$args" | "$fingerprint" --tool create_note --payload-version 1)
q "$db" "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,
    state, response, claim_token, completed_at, expires_at, forget_at) VALUES ('acme', 'old-1',
    'create_note', 1, decode('$fp', 'hex'), 'completed',
    convert_to('{\"note_id\" : 99, \"text\" : \"from before\"}', 'UTF8'), gen_random_uuid(),
    now(), now() + interval '1 hour', now() + interval '1 day')" >/dev/null
call create_note $tok_acme old-1 "$args"
answer earlier_record_replayed 201
expect earlier_record_replayed_header test "$(hdr Idempotent-Replayed)" = true
expect earlier_record_as_stored test "$body" = '{"note_id" : 99, "text" : "from before"}'
expect earlier_record_effect_not_run test "$(notes old-1)" = 0

# no key: 400.
http -X POST "http://127.0.0.1:$port/v1/tools/create_note" -H "Authorization: Bearer $tok_acme" \
    -H 'Content-Type: application/json' --data-binary '{"text": "x"}'
answer no_key 400 idempotency-key-missing
# a key that is not an operation ID: 400.
call create_note $tok_acme '"with space"' '{"text": "x"}'
answer key_with_space 400 invalid-idempotency-key
# (Each way a key is malformed: the unit test gateway_key.)
call create_note $tok_acme twice-1 '{"text": "x"}' -H 'Idempotency-Key: twice-2'
answer key_sent_twice 400 invalid-idempotency-key
call create_note $tok_acme '"a\"b"' '{"text": "x"}'
answer key_quoted_escape 201
expect key_quoted_escape_unquoted test "$(hdr Idem-Operation-Id)" = 'a"b'

# invalid arguments: 400 naming the field as a JSON Pointer; nothing written.
call create_note $tok_acme bad-1 '{"text": 5}'
answer invalid_type 400 invalid-arguments
expect invalid_type_pointer field_is "['pointer']" /text
call create_note $tok_acme bad-2 '{"text": "x", "tags": ["a", 1]}'
answer invalid_item 400 invalid-arguments
expect invalid_item_pointer field_is "['pointer']" /tags/1
call create_note $tok_acme bad-3 '{"text": "x", "colour": "red"}'
answer invalid_extra 400 invalid-arguments
expect invalid_extra_pointer field_is "['pointer']" /colour
call create_note $tok_acme bad-4 '{}'
answer invalid_required 400 invalid-arguments
expect invalid_required_pointer field_is "['pointer']" /text
call create_note $tok_acme bad-5 '{"text": '
answer invalid_json 400 invalid-arguments
expect invalid_json_pointer field_is "['pointer']" ''
call bump $tok_acme bad-6 '{"by": 11}'
answer invalid_maximum 400 invalid-arguments
expect invalid_maximum_pointer field_is "['pointer']" /by
expect invalid_wrote_nothing test "$(q "$db" "SELECT count(*) FROM idem.operations WHERE operation_id LIKE 'bad-%'")" = 0

# conflict: 422 naming what changed.
call create_note $tok_acme note-1 '{"text": "changed"}'
answer conflict 422 conflict
expect conflict_names_arguments field_is "['changed']" arguments
expect conflict_wrote_nothing test "$(notes note-1)" = 1

# in_progress: another attempt holds the key (a pending record, as an external effect's
# claim leaves it while it runs): 409 and Retry-After.
args='{"by": 1}'
fp=$(printf '%s' "$args" | "$fingerprint" --tool bump --payload-version 1)
q "$db" "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,
    state, claim_token, expires_at, forget_at) VALUES ('acme', 'held-1', 'bump', 1,
    decode('$fp', 'hex'), 'pending', gen_random_uuid(), now() + interval '1 hour',
    now() + interval '1 day')" >/dev/null
call bump $tok_acme held-1 "$args"
answer in_progress 409 in-progress
expect in_progress_retry_after test "$(hdr Retry-After)" = 2

# outcome_unknown: the same record, left pending past the deadline: 502, no Retry-After.
q "$db" "UPDATE idem.operations SET created_at = now() - interval '1 day' WHERE operation_id = 'held-1'" >/dev/null
call bump $tok_acme held-1 "$args"
answer outcome_unknown 502 outcome-unknown
expect outcome_unknown_no_retry_after test -z "$(hdr Retry-After)"
expect outcome_unknown_says_not_new_key field_is "['title']" \
    "Outcome unknown: do not retry under a new key; it is being reconciled"

# rejected: an operator settles it as failed; the stored answer byte for byte, 422, not
# problem+json, the status in a header, the same on every call.
as_role "$db" idem_operator
check resolve_failed 0 "$reconcile" --dsn "$role_dsn" resolve acme held-1 --as failed \
    --receipt '{"refused": "the counter was frozen"}' --note "checked by the test"
refusal=$(stored acme held-1)
call bump $tok_acme held-1 "$args"
answer rejected 422
expect rejected_is_the_stored_answer test "$body" = "$refusal"
expect rejected_not_problem test "$(hdr Content-Type)" = application/json
expect rejected_status_header test "$(hdr Idem-Status)" = rejected
cp "$scratch/body" "$scratch/refusal"
call bump $tok_acme held-1 "$args"
answer rejected_again 422
expect rejected_replayed_alike cmp -s "$scratch/body" "$scratch/refusal"
expect rejected_ran_nothing test "$(q "$db" "SELECT n FROM app.counters")" = 0

# expired: a UUIDv7 key older than the tool's key memory: 410 with the reconciliation
# item; the effect never runs.
old=016e0000-0000-7000-8000-000000000001
call create_note $tok_acme $old '{"text": "late"}'
answer expired 410 expired
expect expired_names_item field_is "['reconciliation']['kind']" expired
expect expired_names_key field_is "['reconciliation']['operation_id']" $old
expect expired_ran_nothing test "$(notes $old)" = 0
expect expired_item_recorded test "$(q "$db" "SELECT count(*) FROM idem.reconciliation_items WHERE operation_id = '$old'")" = 1

# effect_failed: the statement fails (division by zero): 500, nothing stored; the
# retry runs it again.
call divide $tok_acme div-1 '{"d": 0}'
answer effect_failed 500 effect-failed
expect effect_failed_sqlstate field_is "['sqlstate']" 22012
expect effect_failed_stored_nothing test "$(q "$db" "SELECT count(*) FROM idem.operations WHERE operation_id = 'div-1'")" = 0

# misconfigured: the role lacks a privilege: 500 with its own type; the log says what.
call read_secret $tok_acme secret-1 '{}'
answer misconfigured 500 misconfigured
expect misconfigured_logged grep -q "misconfigured: .*permission denied" "$scratch/main.log"

# unknown tool, unknown path: 404.
call no_such_tool $tok_acme k-1 '{}'
answer unknown_tool 404 unknown-tool
# A NUL in the path (%00) does not end the tool's name there: no create_note called.
call 'create_note%00x' $tok_acme k-nul '{"text": "x"}'
answer nul_in_tool_name 404 unknown-tool
expect nul_in_tool_name_ran_nothing test "$(notes k-nul)" = 0
# A string argument holding NUL (\u0000) cannot be a text parameter: 400, nothing run.
call create_note $tok_acme k-nul-arg '{"text": "a\u0000b"}'
answer nul_in_argument 400 invalid-arguments
expect nul_in_argument_ran_nothing test "$(notes k-nul-arg)" = 0
http "http://127.0.0.1:$port/v2/other" -H "Authorization: Bearer $tok_acme"
answer unknown_path 404 not-found

# 401: a missing and an unknown token get the same bytes.
http -X POST "http://127.0.0.1:$port/v1/tools/create_note" -H 'Idempotency-Key: k-2' \
    -H 'Content-Type: application/json' --data-binary '{"text": "x"}'
answer no_token 401 unauthorized
expect no_token_challenge test "$(hdr WWW-Authenticate)" = 'Bearer realm="idem-gateway"'
cp "$scratch/body" "$scratch/401-missing"
call create_note wrong-token k-2 '{"text": "x"}'
answer unknown_token 401 unauthorized
expect unauthorized_same_bytes cmp -s "$scratch/body" "$scratch/401-missing"
http -X POST "http://127.0.0.1:$port/v1/tools/create_note" -H "Authorization: Basic $tok_acme" \
    -H 'Idempotency-Key: k-2' -H 'Content-Type: application/json' --data-binary '{"text": "x"}'
answer basic_scheme 401 unauthorized
expect unauthorized_same_bytes_basic cmp -s "$scratch/body" "$scratch/401-missing"
http "http://127.0.0.1:$port/v1/tools"
answer list_needs_token 401 unauthorized

# 405 with Allow.
http "http://127.0.0.1:$port/v1/tools/create_note" -H "Authorization: Bearer $tok_acme"
answer get_a_tool 405 method-not-allowed
expect get_a_tool_allow test "$(hdr Allow)" = POST
http -X POST "http://127.0.0.1:$port/v1/tools" -H "Authorization: Bearer $tok_acme" -d '{}'
answer post_the_list 405 method-not-allowed
expect post_the_list_allow test "$(hdr Allow)" = GET

# 415: not JSON; a parameter on the media type is fine.
http -X POST "http://127.0.0.1:$port/v1/tools/create_note" -H "Authorization: Bearer $tok_acme" \
    -H 'Idempotency-Key: ct-1' -H 'Content-Type: text/plain' --data-binary '{"text": "x"}'
answer wrong_content_type 415 unsupported-media-type
http -X POST "http://127.0.0.1:$port/v1/tools/create_note" -H "Authorization: Bearer $tok_acme" \
    -H 'Idempotency-Key: ct-2' -H 'Content-Type: Application/JSON; charset=utf-8' \
    --data-binary '{"text": "x"}'
answer content_type_with_charset 201

# 413: over max_body_bytes (4096 here), declared or sent in chunks; nothing written.
big=$(python3 -c 'import json; print(json.dumps({"text": "x" * 5000}))')
call create_note $tok_acme big-1 "$big"
answer too_large 413 body-too-large
call create_note $tok_acme big-2 "$big" -H 'Transfer-Encoding: chunked'
answer too_large_chunked 413 body-too-large
expect too_large_wrote_nothing test "$(q "$db" "SELECT count(*) FROM idem.operations WHERE operation_id LIKE 'big-%'")" = 0

# GET /v1/tools: each tool's name, payload version, schema, windows, stored failures.
http "http://127.0.0.1:$port/v1/tools" -H "Authorization: Bearer $tok_beta"
answer list 200
expect list_tools python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
t = {x['name']: x for x in d['tools']}
assert sorted(t) == ['bump', 'create_note', 'divide', 'log_visit', 'read_secret'], t
n = t['create_note']
assert n['payload_version'] == 1 and n['retention_s'] == 3600 and n['key_memory_s'] == 86400, n
assert n['arguments']['required'] == ['text'] and n['key_required'] is True, n
assert n['stored_failures'] == ['rejected'], n
assert t['bump']['retention_s'] == 604800 and t['bump']['key_memory_s'] == 2592000, t['bump']
assert n['identity'] == {'mode': 'all'}, n
assert t['log_visit']['identity'] == {'mode': 'except', 'fields': ['/requested_at']}, t['log_visit']
" "$scratch/body"

# A tool with an identity policy: drift in the field it leaves out replays; a change in
# another is a conflict naming it (the problem's "changed").
call log_visit $tok_acme visit-1 '{"page": "/home", "requested_at": "2026-12-01T10:00:00Z"}'
answer identity_created 201
call log_visit $tok_acme visit-1 '{"page": "/home", "requested_at": "2026-12-01T10:00:09Z"}'
answer identity_drift_replays 201
expect identity_drift_replayed test "$(hdr Idem-Status)" = replayed
expect identity_drift_ran_once test "$(notes visit-1)" = 1
call log_visit $tok_acme visit-1 '{"page": "/about", "requested_at": "2026-12-01T10:00:09Z"}'
answer identity_change_conflicts 422 conflict
expect identity_change_names_the_field field_is '["changed"]' /page

# The same key under two tenants' tokens: two operations, two effects.
call create_note $tok_acme shared-1 '{"text": "same"}'
answer two_tenants_acme 201
expect two_tenants_acme_created test "$(hdr Idem-Status)" = created
call create_note $tok_beta shared-1 '{"text": "same"}'
answer two_tenants_beta 201
expect two_tenants_beta_created test "$(hdr Idem-Status)" = created
expect two_tenants_two_operations test "$(q "$db" "SELECT count(*) FROM idem.operations WHERE operation_id = 'shared-1'")" = 2
expect two_tenants_two_effects test "$(notes shared-1)" = 2

# 32 concurrent identical requests: one effect; every other answer 409 or the receipt.
python3 - "$port" "$tok_acme" >"$scratch/concurrent" <<'PY'
import sys, threading, urllib.request, urllib.error
port, token = sys.argv[1], sys.argv[2]
barrier = threading.Barrier(32)
results = []
def one():
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/tools/create_note",
        data=b'{"text": "together"}', method="POST",
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "together-1",
                 "Content-Type": "application/json"})
    barrier.wait()
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            results.append((r.status, r.headers.get("Idem-Status"), r.read().decode()))
    except urllib.error.HTTPError as e:
        results.append((e.code, e.headers.get("Idem-Status"), e.read().decode()))
threads = [threading.Thread(target=one) for _ in range(32)]
for t in threads: t.start()
for t in threads: t.join()
for r in results: print(r[0], r[1], r[2])
PY
receipt=$(canonical "$(stored acme together-1)")
expect concurrent_32_answers test "$(wc -l <"$scratch/concurrent")" = 32
expect concurrent_one_created test "$(grep -c '^201 created ' "$scratch/concurrent")" = 1
expect concurrent_rest_409_or_receipt test "$(grep -v -c -e '^409 in_progress ' -e "^201 [a-z]* $receipt\$" "$scratch/concurrent")" = 0
expect concurrent_one_effect test "$(notes together-1)" = 1

# The reply lost after commit: the effect waits on a row lock the test holds; the client
# goes away; the lock is released and the call commits; the retry (after any in_progress)
# gets the first receipt, replayed.
hold "$db" "BEGIN; SELECT * FROM app.counters WHERE id = 1 FOR UPDATE;" \
    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'counters' AND l.mode = 'RowShareLock' AND l.granted"
curl -sS -o /dev/null -X POST "http://127.0.0.1:$port/v1/tools/bump" \
    -H "Authorization: Bearer $tok_acme" -H 'Idempotency-Key: lost-1' \
    -H 'Content-Type: application/json' --data-binary '{"by": 3}' 2>/dev/null &
client=$!
for _ in $(seq 1 600); do
    [ "$(q "$db" "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND usename = 'idem_test_gateway' AND wait_event_type = 'Lock'")" = 1 ] && break
    sleep 0.1
done
kill "$client" 2>/dev/null
wait "$client" 2>/dev/null
release_lock
holder=
for _ in $(seq 1 600); do
    call bump $tok_acme lost-1 '{"by": 3}'
    [ "$status" != 409 ] && break
    sleep 0.1
done
answer lost_reply_replayed 201
expect lost_reply_replayed_header test "$(hdr Idempotent-Replayed)" = true
expect lost_reply_stored_text test "$(stored acme lost-1)" = '{"n" : 3}'
expect lost_reply_receipt_value test "$body" = '{"n":3}'
expect lost_reply_effect_once test "$(q "$db" "SELECT n FROM app.counters")" = 3

# unavailable: a gateway whose calls may last 1.5 s, on a row the test holds: 503 and
# Retry-After; nothing stored.
short="$scratch/short.json"
config "$short" "dbname=$db user=idem_test_gateway" 1500
start short "$short"
short_pid=$gw_pid
hold "$db" "BEGIN; SELECT * FROM app.counters WHERE id = 1 FOR UPDATE;" \
    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'counters' AND l.mode = 'RowShareLock' AND l.granted"
call bump $tok_acme slow-1 '{"by": 1}'
release_lock
holder=
answer unavailable 503 unavailable
expect unavailable_retry_after test "$(hdr Retry-After)" = 2
expect unavailable_stored_nothing test "$(q "$db" "SELECT count(*) FROM idem.operations WHERE operation_id = 'slow-1'")" = 0

# The manual's walk-through (tools/idem-gateway/README.md, "Try it"), as written there: its
# table, its token's digest, its configuration (on a free port, this test's database), its
# two curl commands.
readme="$(dirname "$0")/../../tools/idem-gateway/README.md"
python3 - "$readme" "$scratch" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"```(\w*)\n(.*?)```", text, re.S)
sh = [b for t, b in blocks if t == "sh"]
cfg = json.loads([b for t, b in blocks if t == "json"][0])
open(sys.argv[2] + "/readme-table.sql", "w").write(re.search(r'psql -c "(.*?)"', sh[0], re.S).group(1))
open(sys.argv[2] + "/readme-token", "w").write(re.search(r"printf '([^']*)'", sh[0]).group(1))
open(sys.argv[2] + "/readme-digest", "w").write(cfg["tenants"]["acme"]["tokens"][0])
open(sys.argv[2] + "/readme-curl.sh", "w").write(sh[2])
cfg["http"]["port"] = 0
json.dump(cfg, open(sys.argv[2] + "/readme.json", "w"))
PY
readme_db=$(newdb readme)
psql -Atq -d "$readme_db" -f "$scratch/readme-table.sql" >/dev/null
expect readme_digest test "$(hash "$(cat "$scratch/readme-token")")" = "$(cat "$scratch/readme-digest")"
python3 - "$scratch/readme.json" "dbname=$readme_db" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["database"]["dsn"] = sys.argv[2]
json.dump(cfg, open(sys.argv[1], "w"))
PY
start readme "$scratch/readme.json"
sed "s|127.0.0.1:8080|127.0.0.1:$port|; s|curl -i|curl -sS -i|" "$scratch/readme-curl.sh" >"$scratch/readme-run.sh"
check readme_curl_twice 0 bash "$scratch/readme-run.sh"
expect readme_first_created contains "Idem-Status: created"
expect readme_then_replayed contains "Idempotent-Replayed: true"
expect readme_one_note test "$(q "$readme_db" "SELECT count(*) FROM app.notes")" = 1
kill -TERM "$gw_pid"
wait "$gw_pid"

# SIGTERM and SIGINT stop a gateway cleanly: exit 0, said in its log.
kill -TERM "$short_pid"
wait "$short_pid"
rc=$?
expect sigterm_exit_0 test "$rc" = 0
expect sigterm_logged grep -q "stopped" "$scratch/short.log"
kill -INT "$main_pid"
wait "$main_pid"
rc=$?
expect sigint_exit_0 test "$rc" = 0
pids=()

finish
