#!/usr/bin/env bash
# test-gateway-agent-recipes.sh IDEM-GATEWAY IDEM-MIGRATE EXAMPLES-DIR WORK-DIR: the
# recipes of tools/idem-gateway/examples (the Vercel AI SDK, LangChain JS, the OpenAI
# Agents SDK), each installed with npm ci from its package-lock.json into WORK-DIR and run
# as a user runs it, against a real gateway that is killed (SIGKILL) in the middle of the
# call and started again while the example retries through its framework with the same
# operation ID:
#
#   sql   slow_note: the gateway dies while its COMMIT waits (the table's deferred trigger
#         waits on an advisory lock the test holds); the lock is released, the effect
#         commits without the gateway; restarted, the retry is replayed with that receipt.
#   http  send_message: the upstream (upstream.py) acts and holds its answer; the gateway
#         dies; restarted, the retry is answered in_progress (the dead attempt's lease),
#         which the framework hands over as text; the lease is then ended in the database,
#         and the next retry resumes with the same downstream key and gets the upstream's
#         first answer.
#
# Each checks, in the database, exactly one effect (one note; one operation, completed;
# the upstream acted once under one key) and that the answer's receipt is the first one.
# Skipped (77), saying so, when node or a framework cannot be had, unless IDEM_CI=1
# (.ci/run), where that fails the test; and when the gateway is not built.
set -uo pipefail
gateway=$1 migrate=$2 src=$3 work=$4 prefix=gwrecipes
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/gateway.sh"
. "$(dirname "$0")/need.sh"
# IDEM_RECIPES: the frameworks to run (all by default), for a developer's rerun.
read -ra frameworks <<<"${IDEM_RECIPES:-ai-sdk langchain openai-agents}"

gateway_required "libmicrohttpd and libcurl"
for fw in "${frameworks[@]}"; do
    npm_ci "$src/$fw" "$work/$fw" "$fw's packages" "$src/$fw/example.mjs"
done
echo "frameworks installed (or found installed) after ${SECONDS} s"

token=acme-recipes-token-1
db=$(newdb main)
login_role idem_test_gateway idem_app
# The gate: a note's transaction waits at COMMIT for advisory lock 4242, which the test
# holds while it kills the gateway.
q "$db" "CREATE SCHEMA app;
    CREATE TABLE app.notes (id bigserial PRIMARY KEY, tenant text NOT NULL, text text NOT NULL,
        operation_id text NOT NULL);
    CREATE FUNCTION app.wait_at_commit() RETURNS trigger LANGUAGE plpgsql AS
        \$\$ BEGIN PERFORM pg_advisory_xact_lock_shared(4242); RETURN NULL; END \$\$;
    CREATE CONSTRAINT TRIGGER notes_wait_at_commit AFTER INSERT ON app.notes
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION app.wait_at_commit();
    GRANT USAGE ON SCHEMA app TO idem_test_gateway;
    GRANT SELECT, INSERT ON app.notes TO idem_test_gateway;
    GRANT USAGE ON ALL SEQUENCES IN SCHEMA app TO idem_test_gateway" >/dev/null

upstream up
up=$upstream_port
# A fixed port, so that the restarted gateway is where the examples' URL points.
gw_port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
cfg="$scratch/gateway.json"
cat >"$cfg" <<JSON
{
  "http": {"address": "127.0.0.1", "port": $gw_port, "retry_after_s": 1},
  "database": {"dsn": "dbname=$db user=idem_test_gateway", "deadline_ms": 60000},
  "tenants": {"acme": {"tokens": ["$(printf '%s' $token | "$gateway" hash-token)"]}},
  "tools": {
    "slow_note": {
      "description": "Adds a note to the tenant's notes.",
      "operation_id_argument": "operation_id",
      "arguments": {"type": "object", "required": ["text"], "additionalProperties": false,
        "properties": {"text": {"type": "string", "minLength": 1}}},
      "sql": {"statement": "INSERT INTO app.notes (tenant, text, operation_id) VALUES (\$1, \$2, \$3) RETURNING json_build_object('note_id', id, 'text', text)",
              "params": ["\$tenant", "/text", "\$operation_id"]}
    },
    "send_message": {
      "description": "Sends a message through the mail service.",
      "operation_id_argument": "operation_id",
      "arguments": {"type": "object", "required": ["box", "to", "text"], "additionalProperties": false,
        "properties": {"box": {"type": "string"}, "to": {"type": "string"}, "text": {"type": "string"}}},
      "http": {"method": "POST", "url": "http://127.0.0.1:$up/v1/{/box}/messages",
               "body": {"to": {"\$arg": "/to"}, "text": {"\$arg": "/text"}},
               "timeout_ms": 60000, "lease_ms": 300000, "retry": {"max_attempts": 1}}
    }
  }
}
JSON
check check_config 0 "$gateway" --check-config "$cfg"

# start: the gateway on $gw_port, waiting until it has said it listens (its Nth start).
starts=0
start() {
    starts=$((starts + 1))
    "$gateway" --config "$cfg" 2>>"$scratch/gateway.log" &
    gw_pid=$!
    pids+=("$gw_pid")
    gateway_port "$scratch/gateway.log" "$gw_pid" "$starts"
}
kill_gateway() {
    kill -KILL "$gw_pid"
    wait "$gw_pid" 2>/dev/null
}

# wait_for WHAT COMMAND...: until COMMAND succeeds (state, not time: up to five minutes for
# a loaded machine); fails the test naming WHAT otherwise.
wait_for() {
    local what=$1
    shift
    for _ in $(seq 1 3000); do
        "$@" && return 0
        sleep 0.1
    done
    echo "FAIL: waited five minutes for $what" >&2
    failures=$((failures + 1))
    return 1
}

# run_example FRAMEWORK TOOL ARGUMENTS: the example started in the background, its lines
# in $lines ($scratch/FRAMEWORK-TOOL.out), its pid in $ex_pid.
run_example() {
    lines="$scratch/$1-$2.out"
    (cd "$work/$1" && IDEM_MCP_URL="http://127.0.0.1:$gw_port/mcp" IDEM_TOKEN=$token \
        IDEM_TOOL=$2 IDEM_ARGUMENTS=$3 IDEM_RETRY_S=300 \
        exec node example.mjs >"$lines" 2>"$lines.err" 7>&-) & # not holding hold_lock's fifo
    ex_pid=$!
    started_at=$(date +%s.%N)
}
# example_done NAME: waits for the example; checks that it exited 0.
example_done() {
    wait "$ex_pid"
    local rc=$?
    elapsed=$(python3 -c "import sys, time; print('%.1f' % (time.time() - float(sys.argv[1])))" "$started_at")
    expect "$1_example_exit_0" test "$rc" = 0
    if [ "$rc" != 0 ]; then
        sed 's/^/    out: /' "$lines" >&2
        tail -20 "$lines.err" | sed 's/^/    err: /' >&2
    fi
}
# line PYTHON-EXPR: evaluated over the example's attempts (a, a list of dicts); prints it.
line() {
    python3 - "$lines" "$1" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(eval(sys.argv[2]))
PY
}
has_status() { [ "$(line "any(x.get('status') == '$1' for x in a)")" = True ]; }
# The receipt in the last answer's text ("... Receipt: {...}" or "... first receipt: {...}").
receipt_of_last="json.dumps(json.loads(a[-1]['text'].rsplit('eceipt: ', 1)[1]), sort_keys=True)"

blocked_at_commit() {
    [ "$(q "$db" "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")" = 1 ]
}
note_committed() { [ "$(q "$db" "SELECT count(*) FROM app.notes WHERE text = '$1'")" = 1 ]; }
sent_upstream() { [ "$(received "/v1/$1/messages")" = 1 ]; }
upstream_log() {
    curl -sS "http://127.0.0.1:$up/_log" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"
}
received() { upstream_log "len([r for r in d['requests'] if r['path'] == '$1'])"; }
attempted() { [ "$(line "len(a)")" -ge "$1" ] 2>/dev/null; }
# in_progress seen, or the example gone without it (then the checks below say so).
answered_in_progress() { has_status in_progress || ! kill -0 "$ex_pid" 2>/dev/null; }
script() {
    curl -sS -X POST "http://127.0.0.1:$up/_script" -d "{\"path\": \"$1\", \"actions\": $2}" >/dev/null
}

# sql_case FRAMEWORK: killed while the effect's COMMIT waits; it commits without the
# gateway; the retry through the framework is replayed with the stored receipt.
sql_case() {
    local fw=$1 id want
    hold_lock "$db" 4242
    run_example "$fw" slow_note "{\"text\": \"note from $fw\"}"
    wait_for "$fw's call to reach COMMIT" blocked_at_commit
    kill_gateway
    release_lock
    wait_for "$fw's note to commit" note_committed "note from $fw"
    id=$(q "$db" "SELECT operation_id FROM app.notes WHERE text = 'note from $fw'")
    wait_for "$fw's example to see the lost answer" attempted 1
    start
    example_done "${fw}_sql"
    expect "${fw}_sql_first_attempt_lost" test "$(line "a[0].get('status')")" = None
    expect "${fw}_sql_same_id_every_attempt" test "$(line "sorted(set(x['operation_id'] for x in a))")" = "['$id']"
    expect "${fw}_sql_replayed" test "$(line "a[-1].get('status')")" = replayed
    expect "${fw}_sql_text_names_the_id" test "$(line "'$id' in a[-1]['text']")" = True
    expect "${fw}_sql_one_note" test "$(q "$db" "SELECT count(*) FROM app.notes WHERE text = 'note from $fw'")" = 1
    expect "${fw}_sql_one_operation" test "$(q "$db" "SELECT count(*) || ' ' || min(state) FROM idem.operations WHERE tenant = 'acme' AND operation_id = '$id'")" = "1 completed"
    want=$(q "$db" "SELECT json_build_object('note_id', id, 'text', text) FROM app.notes WHERE operation_id = '$id'" |
        python3 -c "import json, sys; print(json.dumps(json.load(sys.stdin), sort_keys=True))")
    expect "${fw}_sql_receipt_is_the_first" test "$(line "$receipt_of_last")" = "$want"
    echo "$fw sql: $(line "len(a)") attempts, statuses $(line "' '.join(str(x.get('status')) for x in a)"), ${elapsed} s (at ${SECONDS} s)"
}

# http_case FRAMEWORK: killed after the upstream acted; the retry is in_progress (the text
# handed over by the framework), then, the lease ended, resumed with the same downstream
# key: the upstream's first answer, the upstream having acted once.
http_case() {
    local fw=$1 id path="/v1/$1/messages" first
    script "$path" '["hold"]'
    run_example "$fw" send_message "{\"box\": \"$fw\", \"to\": \"ada@example.com\", \"text\": \"hello from $fw\"}"
    wait_for "$fw's message to reach the upstream" sent_upstream "$fw"
    id=$(q "$db" "SELECT operation_id FROM idem.operations WHERE tool = 'send_message' AND state = 'pending'")
    kill_gateway
    start
    wait_for "$fw's retry to be answered in_progress" answered_in_progress
    q "$db" "UPDATE idem.operations SET lease_expires_at = now() - interval '1 second'
        WHERE tenant = 'acme' AND operation_id = '$id'" >/dev/null
    example_done "${fw}_http"
    # The text the framework handed over: the gateway's, whole; LangChain's adapters raise
    # it as a ToolException's message, after their own words.
    local text="([x['text'] for x in a if x.get('status') == 'in_progress'] + [''])[0]" starts="[in_progress] "
    if [ "$fw" = langchain ]; then
        starts="MCP tool 'send_message' on server 'idem' returned an error: [in_progress] "
        expect "${fw}_http_in_progress_raised" test "$(line "all(x.get('raised') for x in a if x.get('status') == 'in_progress')")" = True
    fi
    expect "${fw}_http_in_progress_text" test "$(line "$text.startswith(\"$starts\")")" = True
    expect "${fw}_http_in_progress_next_step" test "$(line "'Retry in 1 seconds with the same operation ID' in $text")" = True
    expect "${fw}_http_same_id_every_attempt" test "$(line "sorted(set(x['operation_id'] for x in a))")" = "['$id']"
    expect "${fw}_http_done" test "$(line "a[-1].get('status')")" = created
    expect "${fw}_http_sent_again_once" test "$(received "$path")" = 2
    expect "${fw}_http_acted_once" test "$(upstream_log "d['acts'].get('$path', 0)")" = 1
    expect "${fw}_http_one_downstream_key" test "$(upstream_log "len(set(r['key'] for r in d['requests'] if r['path'] == '$path'))")" = 1
    expect "${fw}_http_one_operation" test "$(q "$db" "SELECT count(*) || ' ' || min(state) FROM idem.operations WHERE tenant = 'acme' AND operation_id = '$id'")" = "1 completed"
    first=$(upstream_log "json.dumps({'id': 'msg_%d' % ([r['path'] for r in d['requests']].index('$path') + 1), 'path': '$path'}, sort_keys=True)")
    expect "${fw}_http_receipt_is_the_first" test "$(line "$receipt_of_last")" = "$first"
    echo "$fw http: $(line "len(a)") attempts, statuses $(line "' '.join(str(x.get('status')) for x in a)"), ${elapsed} s (at ${SECONDS} s)"
}

start
echo "database, upstream and gateway ready after ${SECONDS} s"
for fw in "${frameworks[@]}"; do
    sql_case "$fw"
    http_case "$fw"
done

echo "cases done at ${SECONDS} s"
kill -TERM "$gw_pid"
wait "$gw_pid"
expect sigterm_exit_0 test $? = 0
pids=("${pids[0]}") # the upstream
echo "done after ${SECONDS} s"
if [ "$failures" != 0 ]; then
    echo "the gateway's log:" >&2
    tail -40 "$scratch/gateway.log" | sed 's/^/    /' >&2
fi
finish
