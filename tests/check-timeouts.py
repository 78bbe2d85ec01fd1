#!/usr/bin/env python3
"""check-timeouts.py SOURCE-ROOT: no bare number is a timeout in the library or the tools.

A wait is bounded by an option (its default in the options' initializer, include/idem/),
by what is left of the call's deadline, or by a named constant that says why (a #define
with its comment); never by a number written into the code that waits, as the pool once
waited 10000 ms for the Citus question when connect_timeout_ms was 0.

Every C file outside tests/ and include/ is read, comments and string literals blanked. A
statement that names a timeout, deadline, wait, sleep or poll (or a value in ms or s)
must hold no integer literal of 100 or more, except: a unit factor (1000, 1000000,
1000000000, 3600, 86400) after '*', '/' or '%', and one less than a unit added to round
up to it ('(ms + 999) / 1000'); a bound a value is compared with (an option's range);
and the range and scale of a command-line option given to parse_uint(). Preprocessor
lines are where named constants live, and are not read.
"""
import os
import re
import sys

SKIP_DIRS = {"tests", "include", ".git", "subprojects"}
TIMEOUTISH = re.compile(
    r"\b\w*(timeout|deadline|wait|sleep|linger)\w*\b|\b\w+_ms\b|\bms\b|\b\w+_s\b"
    r"|\b(poll|nanosleep|usleep|sleep|pthread_cond_timedwait)\s*\(",
    re.I,
)
NUMBER = re.compile(r"(?<![\w.])(\d+)[uUlL]*(?![\w.])")
UNITS = {1000, 1000000, 1000000000, 3600, 86400}
SMALLEST = 100


def blank(text):
    """Comments and the insides of string and character literals as spaces, lines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text[i] in "\"'":
            j = i + 1
            while j < n and text[j] != text[i]:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i] + re.sub(r"[^\n]", " ", text[i + 1 : j]) + text[i])
            i = j + 1
            continue
        else:
            out.append(text[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        i = j
    return "".join(out)


def statements(text):
    """(first line, text) of each statement or block head, preprocessor lines left out."""
    stmt, start = "", 1
    for ln, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("#"):
            continue
        for ch in line + "\n":
            if not stmt.strip():
                start = ln
            stmt += ch
            if ch in ";{}":
                yield start, stmt
                stmt = ""


def allowed(before, value):
    if value < SMALLEST:
        return True
    if value in UNITS and before[-1:] in "*/%":
        return True
    if value + 1 in UNITS and before[-1:] == "+":
        return True
    if re.search(r"(<|>|<=|>=|==|!=)$", before):
        return True
    return re.search(r"\bparse_uint\s*\([^;]*$", before) is not None


def literal_timeouts(path):
    for line, stmt in statements(blank(open(path, encoding="utf-8").read())):
        if not TIMEOUTISH.search(stmt):
            continue
        for m in NUMBER.finditer(stmt):
            if not allowed(stmt[: m.start()].rstrip(), int(m.group(1))):
                yield line, " ".join(stmt.split())


def main(root):
    found = 0
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel == ".":
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(d, name)
            for line, stmt in literal_timeouts(path):
                print(f"{os.path.relpath(path, root)}:{line}: a bare number bounds a wait: {stmt}")
                found += 1
    if found:
        print("use an option, what is left of the call's deadline, or a named constant saying why",
              file=sys.stderr)
        return 1
    print("no literal timeouts")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
