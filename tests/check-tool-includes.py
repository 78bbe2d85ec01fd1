#!/usr/bin/env python3
"""The module graph of tools/: its circles, and includes that reach up a folder.

A module is x.c with its header x.h. It needs module M when it includes M's header or
calls a function M's .c file defines (so that a header declaring another file's functions
cannot hide a circle). Prints each circle and each '#include "../' line.

usage: check-tool-includes.py TOOLS_DIR [--report] [--strict]
Exits 1 when an include reaches up a folder, or with --strict when there is a circle;
--report prints what each module needs.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# A function defined in a .c file: not static, at the start of a line, its body follows.
DEFINED = re.compile(r'^(?!static\b)[A-Za-z_][\w \t*]*?\b([a-z_]\w*)\s*\([^;{]*\)\s*\{', re.M)
COMMENT = re.compile(r'/\*.*?\*/', re.S)


def read(path):
    with open(path, encoding='utf-8') as f:
        return COMMENT.sub('', f.read())


def sources(top):
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in ('bench', 'example')]
        for name in files:
            if name.endswith(('.c', '.h')):
                yield os.path.join(folder, name)


def resolve(path, name, headers):
    """The header of tools/ that #include "name" in path names, or None (another tree's)."""
    for base in [os.path.dirname(path)] + sorted({os.path.dirname(h) for h in headers}):
        candidate = os.path.normpath(os.path.join(base, name))
        if candidate in headers:
            return candidate
    return None


def module(path):
    """A module is x.c with its header x.h."""
    return os.path.splitext(path)[0]


def graph(top):
    """Module -> the modules it needs: those whose header it includes, and those whose
    functions its .c file calls (a function declared in another module's header counts
    for the module that defines it)."""
    files = list(sources(top))
    headers = {f for f in files if f.endswith('.h')}
    text = {f: read(f) for f in files}
    defines = {}
    for f in files:
        if f.endswith('.c'):
            for name in DEFINED.findall(text[f]):
                if name != 'main':
                    defines.setdefault(name, set()).add(module(f))
    deps = {}
    for f in files:
        m = module(f)
        deps.setdefault(m, set())
        for h in (resolve(f, n, headers) for n in INCLUDE.findall(text[f])):
            if h is not None and module(h) != m:
                deps[m].add(module(h))
        if f.endswith('.c'):
            for name in set(re.findall(r'\b([a-z_]\w*)\s*\(', text[f])):
                deps[m] |= defines.get(name, set()) - {m}
    return deps, text


def circles(deps):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(deps.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(deps):
        if v not in index:
            visit(v)
    return out


def main():
    top = os.path.normpath(sys.argv[1])
    deps, text = graph(top)
    rel = lambda p: os.path.relpath(p, os.path.dirname(top))
    found = circles(deps)
    for comp in found:
        print('circle: ' + ' <-> '.join(rel(c) for c in comp))
    up = [(rel(f), line.strip()) for f in sorted(text)
          for line in text[f].splitlines() if re.match(r'\s*#\s*include\s+"\.\./', line)]
    for f, line in up:
        print('reaches up: %s: %s' % (f, line))
    if '--report' in sys.argv:
        for m in sorted(deps):
            print('%s -> %s' % (rel(m), ' '.join(sorted(rel(d) for d in deps[m]))))
    print('%d modules, %d circle%s, %d include%s reaching up' % (
        len(deps), len(found), '' if len(found) == 1 else 's', len(up), '' if len(up) == 1 else 's'))
    return 1 if up or (found and '--strict' in sys.argv) else 0


if __name__ == '__main__':
    sys.exit(main())
