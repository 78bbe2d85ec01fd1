#!/usr/bin/env bash
# check-with-postgres.sh WITH-POSTGRES: the throwaway cluster serves the command (and with
# --pgbouncer, PgBouncer in transaction mode in front of it), the exit status is the
# command's, and nothing is left behind, PgBouncer included: not on success, not on
# failure, not on Ctrl-C (SIGINT).
set -euo pipefail
wp=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

leftovers() { # the cluster's directory and any server still using it
    local dir
    dir=$(cat "$scratch/pghost")
    if [ -e "$dir" ]; then echo "directory $dir left behind"; fi
    if pgrep -f -- "-D $dir/data" >/dev/null 2>&1; then echo "server for $dir still running"; fi
    if pgrep -f -- "$dir/pgbouncer.ini" >/dev/null 2>&1; then echo "PgBouncer for $dir still running"; fi
}

# Success: the server answers, and its variables are exported; PgBouncer answers in
# transaction mode.
"$wp" --pgbouncer bash -c 'echo "$PGHOST" > '"$scratch"'/pghost; psql -Atqc "select 40 + 2" > '"$scratch"'/answer
    psql -Atqc "show config" "$IDEM_PGBOUNCER dbname=pgbouncer" | grep "^pool_mode|" | cut -d"|" -f2 > '"$scratch"'/mode
    psql -Atqc "select 6 * 7" "$IDEM_PGBOUNCER dbname=postgres" >> '"$scratch"'/answer'
[ "$(cat "$scratch/answer")" = "42
42" ] || { echo "server or PgBouncer did not answer: $(cat "$scratch/answer")" >&2; exit 1; }
[ "$(cat "$scratch/mode")" = transaction ] || { echo "PgBouncer pool_mode: $(cat "$scratch/mode")" >&2; exit 1; }
[ -z "$(leftovers)" ] || { leftovers >&2; exit 1; }

# Failure: the command's exit status comes back, and cleanup still happens.
set +e
"$wp" bash -c 'echo "$PGHOST" > '"$scratch"'/pghost; exit 7'
rc=$?
set -e
[ "$rc" = 7 ] || { echo "exit status $rc, expected 7" >&2; exit 1; }
[ -z "$(leftovers)" ] || { leftovers >&2; exit 1; }

# Ctrl-C: SIGINT to the whole process group while the command runs.
rm -f "$scratch/pghost"
# Job control gives the run its own process group with SIGINT not ignored, as in a
# terminal.
set +e
set -m
"$wp" --pgbouncer bash -c 'echo "$PGHOST" > '"$scratch"'/pghost; sleep 60' &
pid=$!
set +m
for _ in $(seq 1 300); do [ -s "$scratch/pghost" ] && break; sleep 0.1; done
sleep 0.5
kill -INT -- "-$pid"
wait "$pid"
rc=$?
set -e
[ "$rc" = 130 ] || { echo "interrupted run exited $rc, expected 130" >&2; exit 1; }
for _ in $(seq 1 100); do [ -z "$(leftovers)" ] && break; sleep 0.1; done
[ -z "$(leftovers)" ] || { leftovers >&2; exit 1; }
# A port bound by a socket that does not listen, as a client's outgoing connection is:
# a probe finds nobody there, the server's bind fails, and it starts on another port.
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0))
open(sys.argv[1], "w").write(str(s.getsockname()[1])); time.sleep(300)' "$scratch/taken" &
holder=$!
for _ in $(seq 1 100); do [ -s "$scratch/taken" ] && break; sleep 0.1; done
taken=$(cat "$scratch/taken")
WITH_POSTGRES_TRY_PORT=$taken "$wp" bash -c 'echo "$PGHOST" > '"$scratch"'/pghost
    echo "$PGPORT" > '"$scratch"'/port; psql -Atqc "select 40 + 2" > '"$scratch"'/answer'
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
[ "$(cat "$scratch/answer")" = 42 ] || { echo "no answer after a taken port" >&2; exit 1; }
[ "$(cat "$scratch/port")" != "$taken" ] || { echo "server claims the taken port $taken" >&2; exit 1; }
[ -z "$(leftovers)" ] || { leftovers >&2; exit 1; }

echo "with-postgres: served (with PgBouncer), passed the exit status through, cleaned up three times, moved off a taken port"
