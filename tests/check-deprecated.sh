#!/usr/bin/env bash
# check-deprecated.sh INCLUDE-DIR: the names of idem 0.1 (include/idem/deprecated.h; lib/README.md,
# "Release notes") are declared there alone, each warns where a program uses it and fails a
# build with -Werror=deprecated-declarations, IDEM_NO_DEPRECATED removes them, and every
# public header compiles by itself and in any order with the file's parts.
set -euo pipefail
inc=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "$*" >&2; exit 1; }
read -r -a deps <<<"$(pkg-config --cflags libpq jansson)"
compile() { cc -std=c11 -Wall -Wextra -fsyntax-only -I"$inc" "${deps[@]}" "$@"; }

# Declared in deprecated.h alone.
if grep -rln 'IDEM_DEPRECATED(' "$inc/idem" | grep -v '/deprecated\.h$'; then
    fail "a deprecated name is declared outside include/idem/deprecated.h"
fi

# Each name of 0.1, used the way a program of 0.1 did, through the header it used.
cat >"$work/intent.c" <<'EOF'
#include <idem/intent.h>
int use(const idem_intent *intent);
int use(const idem_intent *intent) { return (int)idem_intent_state_get(intent); }
EOF
cat >"$work/reconcile.c" <<'EOF'
#include <idem/reconcile.h>
int use(PGconn *conn);
int use(PGconn *conn) { return idem_reconcile_resolve(NULL, conn, "t", "o", "expired", "n", "b", NULL); }
EOF
for case in intent:idem_intent_state_get:idem_intent_current_state \
    reconcile:idem_reconcile_resolve:idem_reconcile_resolve_items; do
    IFS=: read -r file name successor <<<"$case"
    if compile -Werror=deprecated-declarations "$work/$file.c" 2>"$work/err"; then
        fail "$name builds with -Werror=deprecated-declarations: it is not marked deprecated"
    fi
    grep -q "$name.\? is deprecated" "$work/err" || fail "$name: no deprecation error"
    compile "$work/$file.c" 2>"$work/warn" || fail "$name no longer builds: $(cat "$work/warn")"
    grep -q "$name.\? is deprecated" "$work/warn" || fail "$name: no deprecation warning"
    grep -q "use $successor()" "$work/warn" || fail "$name: the warning does not name $successor()"
    if compile -Werror -DIDEM_NO_DEPRECATED "$work/$file.c" 2>/dev/null; then
        fail "$name is still declared with IDEM_NO_DEPRECATED"
    fi
done

# What moved out of a header is reachable through it, unless IDEM_NO_DEPRECATED.
printf '#include <idem/fingerprint.h>\nint use(void);\nint use(void) { return idem_jcs_serialize(NULL, NULL, NULL, NULL); }\n' >"$work/jcs.c"
compile -Werror "$work/jcs.c" || fail "fingerprint.h no longer gives idem 0.1's JCS"
if compile -Werror -DIDEM_NO_DEPRECATED "$work/jcs.c" 2>/dev/null; then
    fail "fingerprint.h still includes jcs.h with IDEM_NO_DEPRECATED"
fi

# Every header by itself, and all of them in one order and the reverse, with and without
# the names of 0.1 (the old header names stop with #error without them).
headers=$(cd "$inc" && find idem -name '*.h' | sort)
for h in $headers; do
    printf '#include <%s>\n' "$h" >"$work/one.c"
    compile -Werror "$work/one.c" || fail "$h does not compile by itself"
    case $h in idem/reconcile.h | idem/sweep.h) continue ;; esac
    compile -Werror -DIDEM_NO_DEPRECATED "$work/one.c" ||
        fail "$h does not compile by itself with IDEM_NO_DEPRECATED"
done
for order in "$headers" "$(echo "$headers" | sort -r)"; do
    for h in $order; do printf '#include <%s>\n' "$h"; done >"$work/all.c"
    cat >>"$work/all.c" <<'EOF'
int use(const idem_intent *intent);
int use(const idem_intent *intent) { return (int)idem_intent_state_get(intent); }
EOF
    compile -Werror -Wno-error=deprecated-declarations "$work/all.c" 2>/dev/null ||
        fail "the headers do not compile together in this order: $(echo $order)"
done
echo "the names of idem 0.1 are in deprecated.h, deprecated, and gone with IDEM_NO_DEPRECATED"
