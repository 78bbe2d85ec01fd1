#!/usr/bin/env bash
# test-gateway-schema-ajv.sh GATEWAY-SCHEMA-VERDICTS AJV-DIR WORK-DIR: the gateway's JSON
# Schema subset (tools/common/schema.h) agrees with ajv, a reference validator of
# JSON Schema 2020-12, on a generated corpus of schemas and instances (AJV-DIR/corpus.py,
# a fixed seed). ajv is installed with npm ci from AJV-DIR's package-lock.json into
# WORK-DIR; skipped (77), saying so, when npm or node is missing or cannot install it.
set -uo pipefail
verdicts=$1 src=$2 work=$3
pairs=${IDEM_AJV_PAIRS:-4000} seed=${IDEM_AJV_SEED:-20261201}

if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
    echo "SKIPPED: npm and node are needed for the cross-check against ajv" >&2
    exit 77
fi
mkdir -p "$work"
cp "$src/package.json" "$src/package-lock.json" "$src/verdicts.mjs" "$work/"
if [ ! -f "$work/node_modules/ajv/package.json" ] ||
    ! cmp -s "$src/package-lock.json" "$work/node_modules/.package-lock.json.installed"; then
    if ! (cd "$work" && timeout 300 npm ci --ignore-scripts --no-audit --no-fund \
        >"$work/npm.log" 2>&1); then
        echo "SKIPPED: npm could not install ajv (is the registry reachable?):" >&2
        tail -3 "$work/npm.log" >&2
        exit 77
    fi
    cp "$src/package-lock.json" "$work/node_modules/.package-lock.json.installed"
fi

python3 "$src/corpus.py" "$pairs" "$seed" >"$work/corpus.jsonl" || exit 1
"$verdicts" <"$work/corpus.jsonl" >"$work/ours" || exit 1
node "$work/verdicts.mjs" "$work/corpus.jsonl" >"$work/theirs" || exit 1

refused=$(grep -c '^refused$' "$work/ours")
valid=$(grep -c '^valid$' "$work/theirs")
if [ "$refused" != 0 ]; then
    echo "FAIL: the gateway refused $refused schemas of its own subset" >&2
    exit 1
fi
mismatches=$(paste -d' ' "$work/ours" "$work/theirs" | awk '$1 != $2 { print NR ": gateway " $1 ", ajv " $2 }')
if [ -n "$mismatches" ]; then
    echo "FAIL: the gateway and ajv disagree on $(wc -l <<<"$mismatches") of $pairs pairs:" >&2
    head -10 <<<"$mismatches" | while read -r line; do
        echo "  $line" >&2
        sed -n "${line%%:*}p" "$work/corpus.jsonl" | sed 's/^/    /' >&2
    done
    exit 1
fi
echo "the gateway and ajv agree on all $pairs pairs ($valid valid, $((pairs - valid)) invalid)"
