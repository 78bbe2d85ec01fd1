#!/usr/bin/env python3
"""check-exports.py LIB.so VERSION-SCRIPT ABI-DIR: the shared library keeps the
compatibility promise of lib/README.md ("Release notes").

- The dynamic symbols LIB.so defines are exactly the global names of the version script,
  all start with idem_, and each carries the version node the script puts it in.
- ABI-DIR/<soname>.symbols ("symbol node" lines) is the ABI of the soname as first
  released. Every symbol of it is still exported, in the same node: removing a symbol or
  moving it to another node needs a new soname (and a new file). A symbol not in it is in
  a node of its own, newer than every node of the file: additions never go into a node
  that a released library already has.
"""
import os
import re
import subprocess
import sys


def map_nodes(path):
    """{symbol: node} of the version script's global names."""
    text = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
    out = {}
    for node, body in re.findall(r"([A-Za-z_][\w.]*)\s*\{(.*?)\}\s*[\w.]*\s*;", text, flags=re.S):
        scope = None
        for word in re.findall(r"[\w.*]+:|[^\s;]+", body):
            if word.endswith(":"):
                scope = word[:-1]
            elif scope == "global":
                if word in out:
                    sys.exit(f"{path}: {word} is listed twice ({out[word]}, {node})")
                out[word] = node
    return out


def exported(lib):
    """{symbol: node} of the symbols LIB defines, and the version definitions."""
    lines = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                           capture_output=True, text=True).stdout.splitlines()
    syms, nodes = {}, set()
    for line in lines:
        parts = line.split()
        if len(parts) != 3:
            continue
        kind, name = parts[1], parts[2]
        if kind == "A":
            nodes.add(name)
            continue
        if kind not in "TDBRVW":
            continue
        sym, _, node = name.partition("@@")
        if not node:
            sym, _, node = name.partition("@")
        syms[sym] = node
    return syms, nodes


def soname(lib):
    out = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[(.+?)\]", out)
    return m.group(1) if m else None


def main():
    lib, script, abi_dir = sys.argv[1:4]
    problems = []
    listed = map_nodes(script)
    syms, _ = exported(lib)
    if not syms:
        sys.exit(f"no symbols exported by {lib}")
    for s in sorted(syms):
        if not s.startswith("idem_"):
            problems.append(f"exported without the idem_ prefix: {s}")
    for s in sorted(set(listed) - set(syms)):
        problems.append(f"listed in {script}, not exported: {s}")
    for s in sorted(set(syms) - set(listed)):
        problems.append(f"exported, not listed in {script}: {s}")
    for s in sorted(set(syms) & set(listed)):
        if syms[s] != listed[s]:
            problems.append(f"{s} is exported in node {syms[s] or '(none)'}, listed in {listed[s]}")

    name = soname(lib)
    baseline_path = os.path.join(abi_dir, f"{name}.symbols")
    if name is None:
        problems.append(f"{lib} has no soname")
    elif not os.path.exists(baseline_path):
        problems.append(f"{baseline_path} is missing: a new soname starts a new ABI; write "
                        "its symbols down (symbol node, one a line)")
    else:
        baseline = {}
        for line in open(baseline_path):
            line = line.split("#", 1)[0].split()
            if line:
                baseline[line[0]] = line[1]
        released_nodes = set(baseline.values())
        for s in sorted(baseline):
            if s not in syms:
                problems.append(f"{s} of {name} is gone: removing a symbol needs a new soname")
            elif syms[s] != baseline[s]:
                problems.append(f"{s} moved from node {baseline[s]} to {syms[s]}: a released "
                                "symbol keeps its node")
        for s in sorted(set(syms) - set(baseline)):
            if syms[s] in released_nodes:
                problems.append(f"{s} was added to node {syms[s]}, which {name} already "
                                "released: add it in a new node (before the first release "
                                f"of {name}: add it to {baseline_path} instead)")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{len(syms)} symbols exported by {name}, "
          f"{'all' if not problems else 'NOT all'} as the version script and "
          f"{os.path.basename(baseline_path)} say")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
