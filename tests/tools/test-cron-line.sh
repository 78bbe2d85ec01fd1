#!/usr/bin/env bash
# test-cron-line.sh BUILD-DIR README: the crontab line of tools/README.md ("Running the sweeper"),
# as written, runs as cron runs it: installed under a prefix, with PATH=/usr/bin:/bin and
# no other environment but HOME, whose .pg_service.conf names the database (the manual's
# service=idem).
set -uo pipefail
build=$1 readme=$2 prefix=cron
migrate="$build/tools/idem-migrate"
. "$(dirname "$0")/common.sh"

line=$(grep -m 1 '^[*]/15 .*idem-sweep ' "$readme")
[ -n "$line" ] || { echo "no crontab line for idem-sweep in $readme" >&2; exit 1; }
command=$(cut -d' ' -f6- <<<"$line")
install_prefix=$(sed -n "s|^\(/[^ ]*\)/bin/idem-sweep .*|\1|p" <<<"$command")
[ -n "$install_prefix" ] || { echo "the crontab line does not name idem-sweep by a full path: $command" >&2; exit 1; }

# The install: under a scratch destdir, at the build's prefix, which stands in for the
# manual's.
dest="$scratch/dest"
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >/dev/null ||
    { echo "meson install failed" >&2; exit 1; }
installed=$(find "$dest" -path '*/bin/idem-sweep' | head -n 1)
[ -n "$installed" ] || { echo "idem-sweep not installed in a bin" >&2; exit 1; }
db=$(newdb main)
as_role "$db" idem_sweeper # the sweeper's documented role
q "$db" "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,
    state, claim_token, completed_at, response, expires_at, forget_at)
    SELECT 'acme', 'cron-' || i, 't', 1, sha256(i::text::bytea), 'completed',
    gen_random_uuid(), now() - interval '2 days', '{}', now() - interval '1 day',
    now() + interval '20 days' FROM generate_series(1, 3) AS i"

# The OS user's home: the service the line names, pointing at this run's server as the
# sweeper's role.
home="$scratch/home"
mkdir -p "$home" "$scratch/textfile"
printf '[idem]\nhost=%s\nport=%s\ndbname=%s\nuser=%s\n' "${PGHOST:-/var/run/postgresql}" \
    "${PGPORT:-5432}" "$db" "$role_user" >"$home/.pg_service.conf"
run=${command//"$install_prefix"/"${installed%/bin/idem-sweep}"}
run=${run//\/var\/lib\/idem\/metrics/"$scratch/textfile"}

check cron_line 0 env -i PATH=/usr/bin:/bin HOME="$home" sh -c "$run"
expect cron_line_swept test "$(q "$db" "SELECT count(*) FROM idem.operations WHERE state = 'expired'")" = 3
expect cron_line_metrics test -s "$scratch/textfile/idem_sweep.prom"
expect cron_line_silent test -z "$out$err"
# The bare name, as the manual once had it, is not found under cron's PATH.
check cron_bare_name 127 env -i PATH=/usr/bin:/bin HOME="$home" sh -c "idem-sweep --dsn service=idem"
finish
