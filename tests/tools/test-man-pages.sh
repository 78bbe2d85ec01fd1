#!/usr/bin/env bash
# test-man-pages.sh TOOL PAGE [TOOL PAGE]...: each man page passes `mandoc -T lint -W
# warning`, and has an item for every option that its tool's --help prints (each --long
# option anywhere in it, and each short one of its option list), and for every exit code
# --help lists. Skipped (77), saying so, without mandoc (tools/run test installs it), unless
# IDEM_CI=1, where that fails; no server needed.
set -uo pipefail
failures=0 n=0

. "$(dirname "$0")/need.sh"
need mandoc "apt-get install mandoc"

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# The options a --help text prints: every --long one, and the short ones of lines that
# begin with one ("  -v, --verbose").
help_options() {
    { grep -oE -- '(^|[^A-Za-z0-9-])--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z][a-z0-9-]*'; } <<<"$1"
    sed -n 's/^ \{1,8\}\(-[A-Za-z]\)[, ].*/\1/p' <<<"$1"
}
help_codes() { sed -n '/^Exit status:/,$p' <<<"$1" | sed -n 's/^ \{1,3\}\([0-9]\{1,3\}\)  .*/\1/p'; }

while [ $# -ge 2 ]; do
    tool=$1 page=$2
    shift 2
    name=$(basename "$tool")
    n=$((n + 1))
    lint=$(mandoc -T lint -W warning "$page" 2>&1) || fail "$page: mandoc -T lint -W warning: $lint"
    help=$("$tool" --help)
    # The page as a reader sees it, without the overstrikes of bold and underline.
    text=$(mandoc -T ascii "$page" | sed 's/.\x08//g')
    # Each option is an item of the page's lists: it begins a line ("--dsn conninfo",
    # "-q, --quiet"), not only a mention in passing.
    for opt in $(help_options "$help" | sort -u); do
        n=$((n + 1))
        grep -qE -- "^ +(-[A-Za-z], )?$opt([ ,]|\$)" <<<"$text" ||
            fail "$page lacks the option $opt, which '$name --help' prints"
    done
    exits=$(sed -n '/^EXIT STATUS/,/^[A-Z]/p' <<<"$text")
    for code in $(help_codes "$help"); do
        n=$((n + 1))
        grep -qE "^ +$code( |\$)" <<<"$exits" ||
            fail "$page lacks the exit code $code in EXIT STATUS, which '$name --help' lists"
    done
done

echo "$((n - failures)) of $n checks passed"
[ "$failures" = 0 ]
