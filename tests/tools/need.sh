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
