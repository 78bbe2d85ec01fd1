#!/usr/bin/env bash
# test-readme-first-tool.sh BUILD-DIR README [SANITIZE]: the front README's "A first tool",
# as written: its SQL (the role renamed for this run), its program compiled against the
# build (with the build's sanitizers, SANITIZE as meson's b_sanitize, since the library
# then needs their runtime first), and the transcript it shows, command by command, as the
# role it names.
set -uo pipefail
build=$1 readme=$2 sanitize=${3:-none} prefix=firsttool
migrate="$build/tools/idem-migrate"
. "$(dirname "$0")/common.sh"

# block MARK: the fenced block that follows the comment <!-- first-tool:MARK -->.
block() {
    awk -v mark="<!-- first-tool:$1 -->" '
        $0 == mark { want = 1; next }
        want && /^```/ { if (inside) exit; inside = 1; next }
        inside { print }' "$readme"
}
sql=$(block sql) program=$(block c) transcript=$(block run)
for part in sql program transcript; do
    [ -n "${!part}" ] || { echo "no first-tool $part block in $readme" >&2; exit 1; }
done

role="first_tool_$$_$SRANDOM"
db=$(newdb main)
check sql_applies 0 psql -v ON_ERROR_STOP=1 -Atq -d "$db" -c "${sql//my_server/$role}"
printf '%s\n' "$program" >"$scratch/create-note.c"
flags=$(PKG_CONFIG_PATH="$build/meson-uninstalled" pkg-config --cflags --libs idem) ||
    { echo "pkg-config cannot find the build's idem" >&2; exit 1; }
# shellcheck disable=SC2086 # the flags are words
[ "$sanitize" = none ] || flags="-fsanitize=$sanitize $flags"
check compiles 0 cc -std=c11 -Wall -Wextra -Werror -o "$scratch/create-note" \
    "$scratch/create-note.c" $flags -Wl,-rpath,"$build/lib"

# Each "$ ./create-note ARGS" line runs; the lines up to the next command are its output,
# stdout and stderr together, as a terminal shows them.
ran=0
run_one() { # run_one COMMAND-LINE EXPECTED
    local line=$1 want=$2 got
    eval "set -- ${line#\$ ./create-note }"
    got=$(PGUSER="$role" PGDATABASE="$db" "$scratch/create-note" "$@" 2>&1)
    ran=$((ran + 1))
    [ "$got" = "$want" ] || printf '    %s\n    got:      %s\n    expected: %s\n' "$line" "$got" "$want" >&2
    expect "command_$ran" test "$got" = "$want"
}
cmd="" expected=""
while IFS= read -r line; do
    if [[ "$line" == '$ '* ]]; then
        [ -z "$cmd" ] || run_one "$cmd" "$expected"
        cmd=$line expected=""
    else
        expected+="${expected:+$'\n'}$line"
    fi
done <<<"$transcript"
[ -z "$cmd" ] || run_one "$cmd" "$expected"
expect three_commands test "$ran" = 3

# A login the server refuses leaves no call and no outcome: the program says the error, its
# code and the server's words, not a status read from an outcome nobody filled in. A role
# that does not exist; a wrong password over TCP for the role tools/with-postgres makes
# give one.
refused() { # refused NAME REASON ENV...: the program, run with ENV, fails saying REASON
    local name=$1 reason=$2
    shift 2
    check "refused_$name" 1 env PGDATABASE="$db" PGPASSFILE=/nonexistent "$@" \
        "$scratch/create-note" note-0002 'call back'
    expect "refused_${name}_says_why" err_contains "$reason"
    expect "refused_${name}_gives_the_code" err_contains "(IDEM_EPERM): cannot create the pool"
    expect "refused_${name}_no_status" lacks unavailable
}
refused role 'role "no_such_role_'"$$"'" does not exist' PGUSER="no_such_role_$$"
create_role idem_test_password "LOGIN PASSWORD 'idem-test-password'"
refused password 'password authentication failed for user "idem_test_password"' \
    PGHOST=127.0.0.1 PGUSER=idem_test_password PGPASSWORD=wrong
expect one_note test "$(q "$db" "SELECT count(*) FROM app.notes")" = 1
expect one_record test "$(q "$db" "SELECT count(*) FROM idem.operations")" = 1
q postgres "DROP DATABASE \"$db\"" >/dev/null
q postgres "DROP ROLE IF EXISTS $role" >/dev/null
finish
