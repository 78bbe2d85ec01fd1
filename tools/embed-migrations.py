#!/usr/bin/env python3
"""Embed migrations/NNNN_name.sql files into a C source file, at build time.

Usage: embed-migrations.py OUTPUT.c FILE.sql...
Each file becomes one entry of idem__embedded_migrations[], in version order, with its
exact bytes (the checksum idem-migrate records is computed over these bytes).
"""
import os
import re
import sys

NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def c_bytes(data):
    out = []
    for i in range(0, len(data), 16):
        out.append("    " + ", ".join("0x%02x" % b for b in data[i:i + 16]) + ",")
    return "\n".join(out)


def main():
    output, files = sys.argv[1], sys.argv[2:]
    entries = []
    for path in files:
        base = os.path.basename(path)
        m = NAME.match(base)
        if not m:
            sys.exit("embed-migrations: %s: name must be NNNN_description.sql" % base)
        with open(path, "rb") as f:
            entries.append((int(m.group(1)), base, f.read()))
    entries.sort()
    versions = [e[0] for e in entries]
    if len(set(versions)) != len(versions):
        sys.exit("embed-migrations: two files share a version number")
    lines = ['#include "migrate_embedded.h"', ""]
    for i, (_, _, data) in enumerate(entries):
        lines.append("static const char migration_%d[] = {" % i)
        lines.append(c_bytes(data + b"\0"))
        lines.append("};")
    lines.append("")
    lines.append("const idem__embedded_migration idem__embedded_migrations[] = {")
    for i, (version, base, data) in enumerate(entries):
        lines.append('    {%d, "%s", migration_%d, %d},' % (version, base, i, len(data)))
    lines.append("    {0, NULL, NULL, 0},")
    lines.append("};")
    lines.append("")
    lines.append("const size_t idem__embedded_migrations_count = %d;" % len(entries))
    with open(output, "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
