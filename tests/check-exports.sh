#!/usr/bin/env bash
# check-exports.sh LIB.so VERSION-SCRIPT: the dynamic symbols LIB.so defines are exactly
# the global names of the version script, and all start with idem_.
set -euo pipefail
lib=$1 map=$2
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {sub(/@.*/, "", $3); print $3}' | sort -u)
listed=$(sed -e 's#/\*.*\*/##' "$map" | awk '/global:/{g=1;next} /local:/{g=0} g' |
    tr -d ' \t;' | grep -v '^$' | sort -u)
status=0
if [ -z "$exported" ]; then
    echo "no symbols exported by $lib" >&2
    exit 1
fi
if bad=$(echo "$exported" | grep -v '^idem_'); then
    echo "exported symbols without the idem_ prefix:" >&2
    echo "$bad" >&2
    status=1
fi
if ! diff <(echo "$listed") <(echo "$exported") >/dev/null; then
    echo "exports differ from $map (< listed only, > exported only):" >&2
    diff <(echo "$listed") <(echo "$exported") >&2 || true
    status=1
fi
echo "$(echo "$exported" | wc -l) symbols exported, all listed in the version script"
exit $status
