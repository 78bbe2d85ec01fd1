#!/usr/bin/env bash
# check-units.sh BUILD-DIR SOURCE-DIR: the systemd units meson install writes name the
# install's own paths (README.md, "Installing"). First BUILD-DIR, installed whole into a
# scratch destdir at its own prefix; then SOURCE-DIR configured afresh with the prefix
# /opt/idem-test, whose units alone are installed (`--tags systemd`) and whose other files
# are those meson would install. In each, every absolute path a unit names is a program the
# install puts under the prefix (executable, and its rpath holding the libidem.so.2 it
# needs), the configuration under the install's sysconfdir, or a file in a directory the
# unit creates itself (StateDirectory=); no unit names /usr/local unless that is the prefix;
# the gateway's request log is exempt from journald's rate limit; and systemd-analyze
# verify, when this host has it, finds nothing to say.
set -euo pipefail
build=$1 source=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "$*" >&2; exit 1; }

# option BUILD NAME: the value of meson's option NAME in BUILD.
option() {
    meson introspect "$1" --buildoptions |
        python3 -c 'import json, sys
print({o["name"]: o["value"] for o in json.load(sys.stdin)}[sys.argv[1]])' "$2"
}
# installed_paths BUILD: every path meson install puts files at, one a line.
installed_paths() {
    meson introspect "$1" --installed |
        python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin).values()))'
}
# under_prefix PREFIX DIR: DIR as meson places it (a relative one under PREFIX).
under_prefix() { case $2 in /*) echo "$2" ;; *) echo "$1/$2" ;; esac; }

# values UNIT: "KEY VALUE" for each setting of UNIT (comments and sections left out).
values() { sed -n 's/^\([A-Za-z]\+\)=\(.*\)$/\1 \2/p' "$1"; }

# check_path UNIT PATH: PATH, which UNIT names, is installed, configuration, or state.
check_path() {
    local unit=$1 path=$2 dir
    case $path in
    "$sysconfdir"/idem/*) return 0 ;; # the operator's file, read from the install's sysconfdir
    "$prefix"/*)
        [ -e "$dest$path" ] || grep -qxF "$path" "$listed" ||
            fail "${unit##*/} names $path, which the install does not put there"
        return 0
        ;;
    /var/lib/*)
        for dir in $(sed -n 's/^StateDirectory=//p' "$unit"); do
            case ${path#/var/lib/} in "$dir" | "$dir"/*) return 0 ;; esac
        done
        fail "${unit##*/} names $path, in no directory it creates (StateDirectory=)"
        ;;
    esac
    fail "${unit##*/} names $path: not under the prefix $prefix, not configuration under" \
        "$sysconfdir/idem, not in its StateDirectory="
}

# check_program UNIT PATH: a program UNIT runs is installed under the prefix; when it is
# there, it is executable and finds the libidem.so.2 it needs by its rpath.
check_program() {
    local unit=$1 path=$2 runpath
    case $path in
    "$prefix"/*) ;;
    *) fail "${unit##*/} runs $path, which is not under the prefix $prefix" ;;
    esac
    [ -e "$dest$path" ] || return 0 # listed, not built: check_path looked it up
    [ -x "$dest$path" ] || fail "${unit##*/} runs $path, which is not executable"
    grep -q 'Shared library: \[libidem.so.2\]' <<<"$(readelf -d "$dest$path")" || return 0
    runpath=$(readelf -d "$dest$path" | sed -n 's/.*R\(UN\)\?PATH.*\[\(.*\)\]/\2/p')
    [ -e "$dest$runpath/libidem.so.2" ] ||
        fail "${unit##*/} runs $path, whose rpath '$runpath' has no libidem.so.2 in the install"
}

# check_unit UNIT: the paths UNIT names, its programs, its configuration.
check_unit() {
    local unit=$1 key value word words config_check='' config=''
    ! grep -n '@[A-Z_]*@' "$unit" || fail "${unit##*/} keeps a placeholder"
    if [ "$prefix" != /usr/local ] && grep -n /usr/local "$unit"; then
        fail "${unit##*/} names /usr/local, but the prefix is $prefix"
    fi
    while read -r key value; do
        case $key in Exec*)
            word=${value%% *}
            word=${word#[-@+!:]}
            case $word in /*) check_program "$unit" "$word" ;; esac
            ;;
        esac
        read -ra words <<<"$value"
        for word in "${words[@]}"; do
            word=${word#[-@+!:]}
            case $word in /*) check_path "$unit" "$word" ;; esac
        done
        case $key=$value in
        ExecStartPre=*--check-config\ *)
            config_check=${value#*--check-config }
            config_check=${config_check%% *}
            ;;
        ExecStart=*--config\ *)
            config=${value#*--config }
            config=${config%% *}
            ;;
        esac
    done < <(values "$unit")
    [ "$config_check" = "$config" ] ||
        fail "${unit##*/} checks '$config_check' before it starts, but starts with '$config'"
}

# check_install DEST PREFIX SYSCONFDIR LISTED: the units installed under DEST at PREFIX.
check_install() {
    dest=$1 prefix=$2 sysconfdir=$3 listed=$4
    local units=$dest$prefix/lib/systemd/system unit
    [ -d "$units" ] || fail "no systemd units under $prefix/lib/systemd/system"
    local expected=(idem-sweep.service idem-sweep.timer)
    if [ -e "$dest$prefix/bin/idem-gateway" ] || grep -qxF "$prefix/bin/idem-gateway" "$listed"; then
        expected+=(idem-gateway.service)
    fi
    for unit in "${expected[@]}"; do
        [ -f "$units/$unit" ] || fail "$unit not installed under $prefix/lib/systemd/system"
    done
    for unit in "$units"/*; do
        check_unit "$unit"
    done
    grep -qx 'StateDirectory=idem/metrics' "$units/idem-sweep.service" ||
        fail "idem-sweep.service does not create its metrics directory" \
            "(StateDirectory=idem/metrics)"
    # The request log, a line a request, must not meet journald's rate limit.
    [ ! -f "$units/idem-gateway.service" ] ||
        grep -qx 'LogRateLimitIntervalSec=0' "$units/idem-gateway.service" ||
        fail "idem-gateway.service leaves its request log to journald's rate limit" \
            "(LogRateLimitIntervalSec=0)"
}

# 1. The build as configured, installed whole: the programs are there to look at.
prefix=$(option "$build" prefix)
meson install -C "$build" --destdir "$scratch/whole" --no-rebuild --quiet >/dev/null
: >"$scratch/none"
check_install "$scratch/whole" "$prefix" \
    "$(under_prefix "$prefix" "$(option "$build" sysconfdir)")" "$scratch/none"
# systemd's own reading, with the install's paths moved into the destdir; optional (the
# systemd package).
if command -v systemd-analyze >/dev/null; then
    mkdir "$scratch/verify"
    for unit in "$scratch/whole$prefix"/lib/systemd/system/*; do
        sed "s|$prefix/|$scratch/whole$prefix/|g" "$unit" >"$scratch/verify/${unit##*/}"
    done
    systemd-analyze verify --man=no "$scratch/verify"/* >"$scratch/verify.log" 2>&1 ||
        fail "systemd-analyze verify: $(cat "$scratch/verify.log")"
    [ ! -s "$scratch/verify.log" ] || fail "systemd-analyze verify: $(cat "$scratch/verify.log")"
fi

# 2. Another prefix, as meson's option sets it: units only, checked against meson's list.
meson setup "$scratch/other" "$source" --prefix /opt/idem-test -Dtests=disabled \
    -Dgateway="$(option "$build" gateway)" >"$scratch/setup.log" 2>&1 ||
    fail "meson setup --prefix /opt/idem-test: $(cat "$scratch/setup.log")"
meson install -C "$scratch/other" --destdir "$scratch/units" --no-rebuild --tags systemd \
    --quiet >/dev/null
installed_paths "$scratch/other" >"$scratch/listed"
check_install "$scratch/units" /opt/idem-test \
    "$(under_prefix /opt/idem-test "$(option "$scratch/other" sysconfdir)")" "$scratch/listed"
echo "units checked at $prefix and /opt/idem-test"
