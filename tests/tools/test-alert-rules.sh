#!/usr/bin/env bash
# test-alert-rules.sh IDEM-SWEEP IDEM-MIGRATE RULES: the alert rules file (tools/idem-alerts.yml)
# passes `promtool check rules`; a real sweep's metrics file passes `promtool check
# metrics`; and `promtool test rules`, with series made from the files of real sweeps
# against the server of tools/with-postgres (healthy, one open reconciliation item of each
# kind, a run that stops with work due, a failing run, no run at all) and from the
# gateway's metric names, finds each alert firing on its bad case and every alert silent
# on the healthy one (tests/tools/alert_tests.py). Skipped (77), saying so, without
# promtool (Debian's prometheus package; tools/run test installs it), unless IDEM_CI=1,
# where that fails.
set -uo pipefail
sweep=$1 migrate=$2 rules=$3 prefix=al
. "$(dirname "$0")/common.sh"

. "$(dirname "$0")/need.sh"
need promtool "apt-get install --no-install-recommends prometheus"

check rules_valid 0 promtool check rules "$rules"

# records DB PREFIX N: N completed records of tenant acme, past their retention.
records() {
    q "$1" "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,
        state, response, claim_token, completed_at, expires_at, forget_at)
        SELECT 'acme', '$2' || i, 't', 1, sha256(('$2' || i)::bytea), 'completed',
        convert_to('{}', 'UTF8'), gen_random_uuid(), now(), now() - interval '1 minute',
        now() + interval '1 day'
        FROM generate_series(1, $3) i" >/dev/null
}
metric() { sed -n "s/^$2 //p" "$scratch/$1.prom"; }

# Healthy: due records swept, nothing open.
db=$(newdb healthy)
as_role "$db" idem_sweeper
records "$db" h- 3
check sweep_healthy 0 "$sweep" --dsn "$role_dsn" --metrics-file "$scratch/healthy.prom"
check metrics_lint 0 sh -c 'promtool check metrics <"$1"' promtool "$scratch/healthy.prom"
expect healthy_complete test "$(metric healthy idem_sweep_complete)" = 1

# A failing run (the database is gone) leaves the last success's file as it was.
cp "$scratch/healthy.prom" "$scratch/failing.prom"
check sweep_failing 78 "$sweep" --dsn "dbname=${db}_gone" --metrics-file "$scratch/failing.prom"
expect failing_leaves_file cmp -s "$scratch/healthy.prom" "$scratch/failing.prom"

# One open reconciliation item of each kind idem records.
db=$(newdb open)
as_role "$db" idem_sweeper
for kind in expired stalled_pending outcome_unknown lease_lost outbox_exhausted intent; do
    q "$db" "INSERT INTO idem.reconciliation_items (tenant, operation_id, kind, tool, fingerprint)
             VALUES ('acme', 'op-$kind', '$kind', 't', sha256('$kind'::bytea))" >/dev/null
done
check sweep_open 0 "$sweep" --dsn "$role_dsn" --metrics-file "$scratch/open.prom"
check metrics_lint_open 0 sh -c 'promtool check metrics <"$1"' promtool "$scratch/open.prom"
for kind in expired stalled_pending outcome_unknown lease_lost outbox_exhausted intent; do
    expect "open_$kind" test "$(metric open "idem_reconciliation_items_open{kind=\"$kind\"}")" = 1
done

# Behind: a run that stops at its limit with records still due.
db=$(newdb behind)
as_role "$db" idem_sweeper
records "$db" b- 3
check sweep_behind 0 "$sweep" --dsn "$role_dsn" --batch 1 --max-batches 1 --metrics-file "$scratch/behind.prom"
expect behind_incomplete test "$(metric behind idem_sweep_complete)" = 0

# The operations manual's table names every metric a sweep writes, every kind and every
# alert of the rules.
manual="$(dirname "$0")/../../tools/README.md"
for name in $(sed -n 's/^\([a-z_]*\)[{ ].*/\1/p' "$scratch/open.prom" | sort -u) \
    expired stalled_pending outcome_unknown lease_lost outbox_exhausted intent \
    $(sed -n 's/^ *- alert: //p' "$rules"); do
    expect "manual_names_$name" grep -q "\`$name[\`{]" "$manual"
done

# The alerts, on the rules without their annotations (the text is not what is tested).
awk '/^ *annotations:/ { skip = index($0, "a"); next }
     skip && (match($0, /[^ ]/) > skip) { next }
     { skip = 0; print }' "$rules" >"$scratch/rules.yml"
check rules_stripped_valid 0 promtool check rules "$scratch/rules.yml"
python3 "$(dirname "$0")/alert_tests.py" "$scratch/rules.yml" "$scratch" >"$scratch/tests.yml" ||
    { echo "FAIL: alert_tests.py" >&2; exit 1; }
check alerts_fire_and_stay_silent 0 promtool test rules "$scratch/tests.yml"
n_alerts=$(grep -c '^ *- alert:' "$rules")
n_cases=$(grep -c '"name":' "$scratch/tests.yml")
echo "promtool test rules: $n_alerts alerts in $n_cases cases"

echo "$((n - failures)) of $n checks passed"
[ "$failures" = 0 ]
