# Sourced by tests that need a program the suite installs through tools/run test.
# need PROGRAM HOW: go on when PROGRAM is on the PATH; else skip (77), saying so and HOW to
# install it, or, under IDEM_CI=1, fail.
need() {
    command -v "$1" >/dev/null && return 0
    if [ "${IDEM_CI:-}" = 1 ]; then
        echo "FAIL (IDEM_CI=1): $1 is not installed ($2)" >&2
        exit 1
    fi
    echo "SKIPPED: $1 is not installed ($2; tools/run test does)" >&2
    exit 77
}

# cannot WHY: skip (77), saying WHY, or, under IDEM_CI=1, fail.
cannot() {
    if [ "${IDEM_CI:-}" = 1 ]; then
        echo "FAIL (IDEM_CI=1): $1" >&2
        exit 1
    fi
    echo "SKIPPED: $1" >&2
    exit 77
}

# npm_ci SRC WORK WHAT [FILE...]: SRC's package.json and package-lock.json, and each FILE,
# copied into WORK, and npm ci run there once per lock (again when SRC's lock changes);
# cannot() naming WHAT when npm and node are missing or the registry cannot be reached.
npm_ci() {
    local src=$1 work=$2 what=$3
    shift 3
    command -v npm >/dev/null && command -v node >/dev/null ||
        cannot "npm and node are needed for $what"
    mkdir -p "$work"
    cp "$src/package.json" "$src/package-lock.json" "$@" "$work/"
    if [ -d "$work/node_modules" ] &&
        cmp -s "$src/package-lock.json" "$work/node_modules/.package-lock.json.installed"; then
        return 0
    fi
    if ! (cd "$work" && timeout 300 npm ci --ignore-scripts --no-audit --no-fund \
        >"$work/npm.log" 2>&1); then
        tail -3 "$work/npm.log" >&2
        cannot "npm could not install $what (is the registry reachable?)"
    fi
    cp "$src/package-lock.json" "$work/node_modules/.package-lock.json.installed"
}
