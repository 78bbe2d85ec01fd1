#!/usr/bin/env bash
# test-gateway-console.sh IDEM-GATEWAY IDEM-MIGRATE CONSOLE-DIR WORK-DIR SHOTS-DIR: the
# gateway's reconciliation console (tools/idem-gateway/README.md, "The reconciliation
# console") in a real browser: Debian's Chromium, headless, driven by playwright-core (pinned
# by CONSOLE-DIR's package-lock.json, installed with npm ci into WORK-DIR) through
# CONSOLE-DIR/console.mjs, against a real gateway and PostgreSQL. Items are made by late
# retries through the gateway (UUIDv7 keys past their key memory), plus rows written for
# an outcome_unknown item whose operation ID, tool and receipt hold markup and for an item
# last seen days ago. Then the database must show the resolution (note, by, when) and
# nothing the refused forms tried. A PNG per page goes to SHOTS-DIR. Chromium is installed
# with apt-get when missing and the test runs as root; otherwise, and when npm cannot
# install playwright-core, skipped (77) unless IDEM_CI=1, where that fails.
set -uo pipefail
gateway=$1 migrate=$2 src=$3 work=$4 shots=$5 prefix=gwcon
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/gateway.sh"
. "$(dirname "$0")/need.sh"
gateway_required "libmicrohttpd and libcurl"

chromium=/usr/bin/chromium
if [ ! -x "$chromium" ]; then
    [ "$(id -u)" = 0 ] || cannot "$chromium is missing (apt-get install chromium, as root)"
    # The package lists may be stale (or absent, in a fresh container): updated once, then.
    export DEBIAN_FRONTEND=noninteractive
    timeout 900 apt-get install -y chromium >"$scratch/apt.log" 2>&1 ||
        { timeout 300 apt-get update -q >>"$scratch/apt.log" 2>&1 &&
            timeout 900 apt-get install -y chromium >>"$scratch/apt.log" 2>&1; } ||
        { tail -3 "$scratch/apt.log" >&2; cannot "apt-get could not install chromium"; }
fi
mkdir -p "$shots"
npm_ci "$src" "$work" playwright-core "$src"/*.mjs

hash() { printf '%s' "$1" | "$gateway" hash-token; }
op_token=operator-alice-token-1 acme_token=acme-tenant-token-1 globex_token=globex-tenant-token-1

db=$(newdb main)
login_role idem_test_gateway idem_app
as_role "$db" idem_operator
q "$db" "CREATE SCHEMA app;
    CREATE TABLE app.notes (id bigserial PRIMARY KEY, tenant text NOT NULL, text text NOT NULL);
    GRANT USAGE ON SCHEMA app TO idem_test_gateway;
    GRANT SELECT, INSERT ON app.notes TO idem_test_gateway;
    GRANT USAGE ON ALL SEQUENCES IN SCHEMA app TO idem_test_gateway" >/dev/null
# The provider of an http tool: its first dispatch is dropped (outcome unknown), its status
# request fails (the resolver's answer recorded, the outcome still unknown).
upstream provider
up=$upstream_port
post() { curl -sS -X POST "http://127.0.0.1:$up/$1" -d "$2" >/dev/null; }
cfg="$scratch/gateway.json"
cat >"$cfg" <<JSON
{
  "http": {"address": "127.0.0.1", "port": 0},
  "database": {"dsn": "dbname=$db user=idem_test_gateway", "deadline_ms": 60000,
               "acquire_timeout_ms": 60000},
  "tenants": {"acme": {"tokens": ["$(hash $acme_token)"]},
              "globex": {"tokens": ["$(hash $globex_token)"]}},
  "console": {"dsn": "$role_dsn", "operators": {"alice": {"tokens": ["$(hash $op_token)"]}}},
  "tools": {
    "send_email": {
      "arguments": {"type": "object", "required": ["to"], "properties": {"to": {"type": "string"}}},
      "http": {"url": "http://127.0.0.1:$up/mail", "timeout_ms": 1000, "lease_ms": 2000,
               "reference": "/id", "retry": {"max_attempts": 1},
               "resolver": {"url": "http://127.0.0.1:$up/mail/status/{key}", "receipt": "/message",
                            "done_when": {"pointer": "/state", "equals": "sent"},
                            "timeout_ms": 1500}}
    },
    "create_note": {
      "retention_s": 3600, "key_memory_s": 86400,
      "arguments": {"type": "object", "required": ["text"],
                    "properties": {"text": {"type": "string"}}},
      "sql": {"statement": "INSERT INTO app.notes (tenant, text) VALUES (\$1, \$2) RETURNING json_build_object('note_id', id, 'text', text)",
              "params": ["\$tenant", "/text"]}
    }
  }
}
JSON
check check_config 0 "$gateway" --check-config "$cfg"

# broken NAME PYTHON-EDIT WANT: refused with 65, the message containing WANT.
broken() {
    edited_config "$cfg" "$scratch/$1.json" "$2"
    check "check_config_$1" 65 "$gateway" --check-config "$scratch/$1.json"
    expect "check_config_$1_names_it" err_contains "$3"
}
broken operator_token_is_tenants \
    'd["console"]["operators"]["bob"] = {"tokens": [d["tenants"]["globex"]["tokens"][0]]}' \
    '/console/operators/bob/tokens/0: is also a token digest of tenant "globex" (/tenants/globex/tokens)'
broken operator_token_twice \
    'd["console"]["operators"]["bob"] = {"tokens": d["console"]["operators"]["alice"]["tokens"]}' \
    '/console/operators/bob/tokens/0: the same token digest is listed twice'
broken path_taken 'd["console"]["path"] = "/v1/console/"' \
    "/console/path: /v1 is the gateway's own route"
broken path_shape 'd["console"]["path"] = "/console"' '/console/path: must be a path prefix'
broken operator_name 'd["console"]["operators"]["bob smith"] = {"tokens": ["'"$(hash bob)"'"]}' \
    "/console/operators/bob smith: an operator's name may hold only"
broken no_operators 'd["console"]["operators"] = {}' '/console/operators: is required'
broken no_dsn 'del d["console"]["dsn"]' '/console/dsn'
broken unknown_member 'd["console"]["sessions"] = 1' '/console/sessions'

"$gateway" --config "$cfg" >"$scratch/gw.log" 2>&1 &
pids+=($!)
gateway_port "$scratch/gw.log" "${pids[-1]}"
base="http://127.0.0.1:$port"

# call TOKEN KEY TEXT: POST create_note; the status in $status.
call() {
    http -X POST "$base/v1/tools/create_note" -H "Authorization: Bearer $1" \
        -H "Idempotency-Key: $2" -H 'Content-Type: application/json' \
        --data "$(python3 -c 'import json,sys; print(json.dumps({"text": sys.argv[1]}))' "$3")"
}
# Late retries: UUIDv7 keys from 2019, far past the tool's key memory: 410, an item each.
expired_op=016e0000-0000-7000-8000-000000000001
csrf_op=016e0000-0000-7000-8000-000000000002
globex_op=016e0000-0000-7000-8000-000000000003
call $acme_token $expired_op late
expect late_retry_expired test "$status" = 410
call $acme_token $csrf_op late
expect late_retry_expired_2 test "$status" = 410
call $globex_token $globex_op late
expect late_retry_expired_globex test "$status" = 410
# A key whose operation ID and receipt hold markup; its item, of an outcome nobody knows,
# names a tool that is markup too.
# (Quoted: an sf-string, as the key may be sent.)
script_op="<script>alert('op')</script>"
call $acme_token "\"$script_op\"" "<script>alert('receipt')</script>"
expect markup_key_created test "$status" = 201
q "$db" "INSERT INTO idem.reconciliation_items (tenant, operation_id, kind, tool, fingerprint,
    fingerprint_matches) VALUES ('acme', \$k\$$script_op\$k\$, 'outcome_unknown',
    '<img src=x onerror=alert(2)>', sha256('x'), true)" >/dev/null
q "$db" "INSERT INTO idem.reconciliation_items (tenant, operation_id, kind, tool, fingerprint,
    first_seen, last_seen) VALUES ('acme', 'old-1', 'stalled_pending', 'create_note',
    sha256('y'), now() - interval '4 days', now() - interval '3 days')" >/dev/null
# An external dispatch whose outcome nobody knows: its retry asks the provider, which
# fails to say: still unknown, the answer recorded.
external_op=mail-1
email() {
    http -X POST "$base/v1/tools/send_email" -H "Authorization: Bearer $acme_token" \
        -H "Idempotency-Key: $external_op" -H 'Content-Type: application/json' \
        --data '{"to": "a@example.com"}'
}
post _script '{"path": "/mail", "actions": ["drop"]}'
post _status '{"path": "/mail", "actions": ["fail"]}'
email
expect external_unknown test "$status" = 502
email
expect external_still_unknown test "$status" = 502
expect items_made test "$(q "$db" "SELECT count(*) FROM idem.reconciliation_items")" = 6

# The console's headers on every answer, the stylesheet included; the operator's token is
# no tenant's.
http "$base/console/console.css"
expect css_served test "$status" = 200
expect css_csp grep -qi "^content-security-policy: default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'" "$scratch/headers"
http "$base/console/nothing-here"
expect unknown_page_404 test "$status" = 404
expect unknown_page_nosniff grep -qi '^x-content-type-options: nosniff' "$scratch/headers"
expect unknown_page_no_store grep -qi '^cache-control: no-store' "$scratch/headers"
http -X PUT "$base/console/"
expect put_405 test "$status" = 405
http "$base/v1/tools" -H "Authorization: Bearer $op_token"
expect operator_token_not_tenants test "$status" = 401
http -X POST "$base/console/resolve" -H 'Content-Type: application/json' --data '{}'
expect json_post_415 test "$status" = 415
# Another site's form cannot sign a browser in (login CSRF): its Origin is refused.
http -X POST "$base/console/sign-in" -H 'Origin: https://evil.example' --data-urlencode "token=$op_token"
expect foreign_origin_403 test "$status" = 403
expect foreign_origin_no_cookie bash -c "! grep -qi '^set-cookie' '$scratch/headers'"
http -X POST "$base/console/sign-in" -H 'Origin: null' --data-urlencode "token=$op_token"
expect null_origin_403 test "$status" = 403
http -X POST "$base/console/sign-in" -H "Origin: http://127.0.0.1:$port" --data-urlencode "token=$op_token"
expect same_origin_signs_in test "$status" = 303
expect same_origin_cookie grep -qi '^set-cookie: idem_console=alice\.' "$scratch/headers"

note='Checked at the provider: nothing was sent; told the caller. <b>bold</b> & "quoted"'
run_browser() {
    (cd "$work" && BASE="$base" PREFIX=/console/ OPERATOR_TOKEN=$op_token \
        TENANT_TOKEN=$acme_token SHOTS="$shots" EXPIRED_OP=$expired_op CSRF_OP=$csrf_op \
        SCRIPT_OP="$script_op" EXTERNAL_OP=$external_op NOTE="$note" CHROMIUM=$chromium timeout 600 node console.mjs)
}
started=$(date +%s.%N)
check browser 0 run_browser
echo "$out"
[ -n "$err" ] && echo "$err" >&2
echo "browser run: $(grep -c '^ok ' <<<"$out") checks passed, $(grep -c '^FAIL ' <<<"$out") failed, in $(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$started" "$(date +%s.%N)") s"

# The database: the resolved item says who, when and the note; the forged forms changed
# nothing.
row=$(q "$db" "SELECT resolved_by, resolved_at IS NOT NULL AND resolved_at > now() - interval '1 hour', note
    FROM idem.reconciliation_items WHERE tenant = 'acme' AND operation_id = '$expired_op'")
expect resolved_in_db test "$row" = "alice|t|$note"
expect forged_changed_nothing test "$(q "$db" "SELECT count(*) FROM idem.reconciliation_items
    WHERE resolved_at IS NULL")" = 4
row=$(q "$db" "SELECT o.state, i.resolved_by, i.note FROM idem.operations o
    JOIN idem.reconciliation_items i USING (tenant, operation_id)
    WHERE o.tenant = 'acme' AND o.operation_id = '$external_op' AND i.kind = 'outcome_unknown'")
expect external_resolved_in_db test "$row" = "completed|alice|Found at the provider: sent."
# Later calls replay the resolution: never dispatched again.
email
expect external_replayed test "$status" = 201
expect external_replayed_names_reference grep -q 'msg-123' "$scratch/body"
expect forged_no_note test "$(q "$db" "SELECT count(*) FROM idem.reconciliation_items
    WHERE note = 'forged'")" = 0
for png in sign-in list list-filtered item item-markup resolved external external-resolved; do
    expect "screenshot_$png" test -s "$shots/$png.png"
done

# A console whose role has more than idem_operator's rights refuses to serve.
edited_config "$cfg" "$scratch/super.json" 'd["console"]["dsn"] = "dbname='"$db"'"'
"$gateway" --config "$scratch/super.json" >"$scratch/gw2.log" 2>&1 &
pids+=($!)
gateway_port "$scratch/gw2.log" "${pids[-1]}"
cookie=$(python3 - "$port" "$op_token" <<'PY'
import sys, urllib.request, urllib.parse, http.client
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
c.request("POST", "/console/sign-in", urllib.parse.urlencode({"token": sys.argv[2]}),
          {"Content-Type": "application/x-www-form-urlencoded"})
r = c.getresponse()
print(r.getheader("Set-Cookie").split(";")[0])
PY
)
http "http://127.0.0.1:$port/console/" -H "Cookie: $cookie"
expect superuser_role_refused test "$status" = 500
expect superuser_role_says_why grep -q 'is a superuser or BYPASSRLS' "$scratch/body"

echo "$n checks, $failures failed"
[ "$failures" = 0 ]
