#!/usr/bin/env bash
# check-install.sh BUILD-DIR CONSUMER.c: install into a scratch destdir, then compile and
# run a program outside the tree with the flags pkg-config gives for "idem".
set -euo pipefail
build=$1 src=$2
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >/dev/null
pcdir=$(dirname "$(find "$dest" -name idem.pc | head -n 1)")
[ -n "$pcdir" ] || { echo "idem.pc not installed" >&2; exit 1; }
# Point the installed idem.pc at the scratch tree (its dependencies keep their own paths).
prefix=$(grep '^prefix=' "$pcdir/idem.pc" | cut -d= -f2)
sed -i "s|^prefix=.*|prefix=$dest$prefix|" "$pcdir/idem.pc"
pc() { PKG_CONFIG_PATH="$pcdir" pkg-config "$@" idem; }
cc -Wall -Werror -o "$dest/consumer" "$src" $(pc --cflags) $(pc --libs)
libdir=$(pc --variable=libdir)
LD_LIBRARY_PATH="$libdir" "$dest/consumer"
# And the static library, for programs that link it in.
cc -Wall -Werror -o "$dest/consumer-static" "$src" $(pc --cflags) "$libdir/libidem.a" \
    $(PKG_CONFIG_PATH="$pcdir" pkg-config --libs libpq jansson libcrypto) -lpthread
"$dest/consumer-static"
