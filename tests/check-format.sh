#!/usr/bin/env bash
# check-format.sh CLANG-FORMAT SOURCE-ROOT: every C file of the project is formatted with
# the repository's .clang-format.
set -euo pipefail
cf=$1 root=$2
cd "$root"
files=$(find include lib tools tests -name '*.c' -o -name '*.h' | sort)
if ! "$cf" --dry-run -Werror $files; then
    echo "run: clang-format -i <files above>" >&2
    exit 1
fi
echo "$(echo "$files" | wc -l) files formatted"
