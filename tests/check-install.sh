#!/usr/bin/env bash
# check-install.sh BUILD-DIR DATA-DIR: install into a scratch destdir, then compile and run
# programs outside the tree with the flags pkg-config gives for "idem": DATA-DIR/consumer.c
# with the current header layout only, and DATA-DIR/consumer-0.1.c, written against idem
# 0.1, unchanged (lib/README.md, "Release notes").
set -euo pipefail
build=$1 data=$2
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >/dev/null
pcdir=$(dirname "$(find "$dest" -name idem.pc | head -n 1)")
[ -n "$pcdir" ] || { echo "idem.pc not installed" >&2; exit 1; }
# Point the installed idem.pc at the scratch tree (its dependencies keep their own paths).
prefix=$(grep '^prefix=' "$pcdir/idem.pc" | cut -d= -f2)
sed -i "s|^prefix=.*|prefix=$dest$prefix|" "$pcdir/idem.pc"
pc() { PKG_CONFIG_PATH="$pcdir" pkg-config "$@" idem; }
libdir=$(pc --variable=libdir)
fail() { echo "$*" >&2; exit 1; }

# What an install puts where (README.md, "Installing"): the tools an operator runs in bin,
# the demo out of it, the roles script, the alert rules and the migrations' SQL under
# share/idem, the migrations byte for byte those the programs embed (the same files, at
# build time), the man pages under share/man.
root=$(find "$dest" -path '*/bin/idem-migrate' | head -n 1)
root=${root%/bin/idem-migrate}
[ -n "$root" ] || fail "idem-migrate not installed in a bin"
for tool in idem-migrate idem-sweep idem-reconcile idem-fingerprint; do
    [ -x "$root/bin/$tool" ] || fail "$tool not installed in bin"
done
[ ! -e "$root/bin/idem-demo" ] || fail "idem-demo installed in bin (it belongs under libexec)"
[ -x "$root/libexec/idem/idem-demo" ] || fail "idem-demo not installed in libexec/idem"
[ -f "$root/share/idem/idem-roles.sql" ] || fail "share/idem/idem-roles.sql not installed"
# Each tool's man page in its section, the gateway's when the gateway is built.
for page in man1/idem-migrate.1 man1/idem-reconcile.1 man1/idem-fingerprint.1 man8/idem-sweep.8; do
    [ -f "$root/share/man/$page" ] || fail "share/man/$page not installed"
done
if [ -x "$root/bin/idem-gateway" ]; then
    [ -f "$root/share/man/man8/idem-gateway.8" ] || fail "share/man/man8/idem-gateway.8 not installed"
fi
[ -f "$root/share/idem/idem-alerts.yml" ] || fail "share/idem/idem-alerts.yml not installed"
# The systemd units under lib/systemd/system, the gateway's when it is built (the paths they
# name: tests/check-units.sh).
for unit in idem-sweep.service idem-sweep.timer; do
    [ -f "$root/lib/systemd/system/$unit" ] || fail "lib/systemd/system/$unit not installed"
done
if [ -x "$root/bin/idem-gateway" ]; then
    [ -f "$root/lib/systemd/system/idem-gateway.service" ] ||
        fail "lib/systemd/system/idem-gateway.service not installed"
fi
sources=$(cd "$data/../../migrations" && pwd)
for f in "$sources"/[0-9][0-9][0-9][0-9]_*.sql; do
    cmp -s "$f" "$root/share/idem/migrations/${f##*/}" ||
        fail "share/idem/migrations/${f##*/} is not the file the programs embed"
done
[ "$(ls "$root/share/idem/migrations" | wc -l)" = "$(ls "$sources"/[0-9][0-9][0-9][0-9]_*.sql | wc -l)" ] ||
    fail "share/idem/migrations holds other files than the migrations"

# The soname of the compatibility decision.
[ -e "$libdir/libidem.so.2" ] || fail "libidem.so.2 not installed"
grep -q 'Library soname: \[libidem.so.2\]' <<<"$(readelf -d "$libdir/libidem.so.2")" ||
    fail "the installed library's soname is not libidem.so.2"
# Test-only code stays out of the installed libraries.
if nm "$libdir/libidem.a" 2>/dev/null | grep -E ' [TD] idem__(fault_|exec_trace|conn_forget_prepared)'; then
    fail "test-only functions in the installed libidem.a"
fi

cc -Wall -Werror -DIDEM_NO_DEPRECATED -o "$dest/consumer" "$data/consumer.c" $(pc --cflags) \
    $(pc --libs)
LD_LIBRARY_PATH="$libdir" "$dest/consumer"
# And the static library, for programs that link it in.
cc -Wall -Werror -DIDEM_NO_DEPRECATED -o "$dest/consumer-static" "$data/consumer.c" \
    $(pc --cflags) "$libdir/libidem.a" \
    $(PKG_CONFIG_PATH="$pcdir" pkg-config --libs libpq jansson libcrypto) -lpthread
"$dest/consumer-static"

# A program of idem 0.1 builds unchanged; each name it uses that is now deprecated is
# warned about.
cc -Wall -Werror -Wno-error=deprecated-declarations -o "$dest/consumer-0.1" \
    "$data/consumer-0.1.c" $(pc --cflags) $(pc --libs) 2>"$dest/warnings"
for name in idem_intent_state_get idem_reconcile_resolve; do
    grep -q "$name.\? is deprecated" "$dest/warnings" || fail "no deprecation warning for $name"
done
LD_LIBRARY_PATH="$libdir" "$dest/consumer-0.1"
# With IDEM_NO_DEPRECATED the old names are gone.
if cc -DIDEM_NO_DEPRECATED -fsyntax-only "$data/consumer-0.1.c" $(pc --cflags) 2>/dev/null; then
    fail "IDEM_NO_DEPRECATED still declares the names of 0.1"
fi
