#!/usr/bin/env bash
# check-core-state.sh SIZE CORE.a: the core the library and the tools share (lib/core/)
# keeps no state of its own: no object of CORE.a has writable data (.data, .bss) or
# thread-local data (.tdata, .tbss). Read-only tables that need relocation
# (.data.rel.ro) are fine.
set -euo pipefail
size=$1 archive=$2
found=$("$size" -A "$archive" | awk '
    / \(ex / { member = $1 }
    $1 ~ /^\.(data|bss|tdata|tbss)(\.|$)/ && $1 !~ /^\.data\.rel\.ro/ && $2 > 0 {
        print member ": " $1 " (" $2 " bytes)"
    }')
if [ -n "$found" ]; then
    echo "the core holds state (every function of lib/core takes what it needs as arguments):" >&2
    echo "$found" >&2
    exit 1
fi
echo "$("$size" -A "$archive" | grep -c ' (ex ') objects, no writable or thread-local data"
