# Sourced by the tool tests: skipping without a server, fresh databases, and checks.
# Each script sets $prefix (database name prefix) before sourcing.
failures=0 n=0

if ! psql -Atqc 'SELECT 1' dbname=postgres >/dev/null 2>&1; then
    if [ -n "${IDEM_REQUIRE_PG:-}" ]; then
        echo "PostgreSQL required but unreachable" >&2
        exit 1
    fi
    echo "SKIPPED: no PostgreSQL server; run under tools/with-postgres" >&2
    exit 77
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# python3 is called dozens of times a test: the interpreter itself, found once, first in
# PATH (for the test's children too), not a version manager's shim (pyenv's re-reads its
# settings on every call: seconds each on a loaded machine).
if python=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$python" ]; then
    mkdir -p "$scratch/bin" && ln -sf "$python" "$scratch/bin/python3" &&
        PATH="$scratch/bin:$PATH"
fi

# emptydb TAG: a fresh database without idem's schema; prints its name.
emptydb() {
    local name="${prefix}_$1_$$_$SRANDOM" # the pid alone comes round again in a long run
    psql -Atqc "CREATE DATABASE \"$name\" TEMPLATE template0" dbname=postgres >/dev/null || exit 1
    echo "$name"
}

# newdb TAG [VERSION]: a fresh database with idem's migrations (up to VERSION); prints its
# name.
newdb() {
    local name
    name=$(emptydb "$1") || exit 1
    "$migrate" --dsn "dbname=$name" -q up ${2:+--to "$2"} >/dev/null || exit 1
    echo "$name"
}

q() { psql -Atq -d "$1" -c "$2"; }

# create_role NAME OPTIONS: a role, created unless it exists; other tests may create it at
# the same time.
create_role() {
    q postgres "DO \$\$ BEGIN CREATE ROLE $1 $2;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END \$\$" >/dev/null
}

# login_role NAME GROUP: a login role in one of idem's group roles (made by migration
# 0007).
login_role() { create_role "$1" "LOGIN IN ROLE $2"; }

# as_role DB GROUP...: the login a tool runs as in production: a role holding exactly
# GROUP... of idem's group roles (idem_app, idem_operator, idem_sweeper; made by the roles
# script tools/idem-roles.sql, or by migration 0007), neither superuser nor BYPASSRLS, so
# that row-level security holds; trust login, no password. Named idem_test_ and the groups
# (idem_test_operator: the name that tests/support/pgtest.h and PgBouncer's users know).
# Sets and exports $role_user and $role_dsn, a connection string for DB as that role. Setup
# that needs a superuser (migrations, rows written directly) stays on "dbname=DB".
as_role() {
    local db=$1 name
    shift
    name="idem_test_$(IFS=_ && echo "${*#idem_}")"
    if [ -z "${roles_made:-}" ]; then
        psql -Atq -v ON_ERROR_STOP=1 -d postgres -f "$roles_sql" >/dev/null || exit 1
        roles_made=1
    fi
    create_role "$name" "LOGIN NOSUPERUSER NOBYPASSRLS INHERIT IN ROLE $(IFS=, && echo "$*")"
    [ "$(q "dbname=$db user=$name" "SELECT rolsuper OR rolbypassrls FROM pg_roles
        WHERE rolname = current_user")" = f ] || exit 1
    export role_user=$name role_dsn="dbname=$db user=$name"
}
roles_sql="$(dirname "${BASH_SOURCE[0]}")/../../tools/idem-roles.sql"

# check NAME EXPECTED-EXIT COMMAND...: runs COMMAND; its stdout in $out, stderr in $err.
check() {
    local name=$1 want=$2 got
    shift 2
    n=$((n + 1))
    out=$("$@" 2>"$scratch/stderr")
    got=$?
    err=$(cat "$scratch/stderr")
    if [ "$got" != "$want" ]; then
        echo "FAIL: $name: exit $got, expected $want; stdout, stderr:" >&2
        echo "$out" | sed 's/^/    /' >&2
        echo "$err" | sed 's/^/    /' >&2
        failures=$((failures + 1))
        return 1
    fi
    return 0
}

expect() { # expect NAME TEST...: TEST (a command) must succeed
    local name=$1
    shift
    n=$((n + 1))
    if ! "$@"; then
        echo "FAIL: $name (${*})" >&2
        [ -n "${out:-}" ] && echo "$out" | sed 's/^/    out: /' >&2
        [ -n "${err:-}" ] && echo "$err" | sed 's/^/    err: /' >&2
        failures=$((failures + 1))
    fi
}

contains() { grep -q -- "$1" <<<"$out"; }
err_contains() { grep -q -- "$1" <<<"$err"; }
lacks() { ! grep -q -- "$1" <<<"$out" && ! grep -q -- "$1" <<<"$err"; } # on neither stream
json_ok() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert $1, d" "$out"; }

# hold DB SQL READY: a psql session that runs SQL and keeps what it locked until
# release_lock; returns once the query READY answers 1 on DB.
hold() {
    mkfifo "$scratch/hold"
    psql -Atq -d "$1" -f "$scratch/hold" >/dev/null 2>&1 &
    holder=$!
    exec 7>"$scratch/hold"
    echo "$2" >&7
    for _ in $(seq 1 100); do
        [ "$(q "$1" "$3")" = 1 ] && break
        sleep 0.1
    done
}

# hold_lock DB KEY: a psql session holding advisory lock KEY until release_lock.
hold_lock() {
    hold "$1" "SELECT pg_advisory_lock($2);" "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
}

# hold_table_lock DB TABLE: a psql session holding TABLE in ACCESS EXCLUSIVE mode (as a
# migration does) until release_lock.
hold_table_lock() {
    hold "$1" "BEGIN; LOCK $2 IN ACCESS EXCLUSIVE MODE;" "SELECT count(*) FROM pg_locks WHERE locktype = 'relation' AND granted AND mode = 'AccessExclusiveLock' AND relation = '$2'::regclass"
}

release_lock() {
    exec 7>&-
    wait "$holder"
    rm -f "$scratch/hold"
}

# fail_updates DB TABLE SQLSTATE: every UPDATE of TABLE fails with SQLSTATE (and the words
# "failed by the test"), as the server fails a statement when its disk is full, say.
fail_updates() {
    q "$1" "CREATE OR REPLACE FUNCTION public.fail_for_test() RETURNS trigger LANGUAGE plpgsql
        AS \$\$ BEGIN RAISE EXCEPTION 'failed by the test' USING ERRCODE = TG_ARGV[0]; END \$\$;
        CREATE OR REPLACE TRIGGER fail_for_test BEFORE UPDATE ON $2
        FOR EACH ROW EXECUTE FUNCTION public.fail_for_test('$3')" >/dev/null
}

# silent_listener, silent_stop: tests/tools/listener.sh.
. "$(dirname "${BASH_SOURCE[0]}")/listener.sh"

finish() {
    echo "$((n - failures)) of $n checks passed"
    [ "$failures" = 0 ]
}
