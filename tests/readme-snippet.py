#!/usr/bin/env python3
"""readme-snippet.py OUTPUT README NAME

Write README's ```c block that defines the function NAME (a line at column 0 holding
"NAME(") to OUTPUT, for a test to #include, behind a #line directive so that a compiler's
message points at README itself. Fails unless exactly one block defines it: the example
a test compiles is the one the README shows."""
import sys


def blocks(lines):
    """(first line number, body lines) of every ```c block."""
    found, body, start = [], None, 0
    for number, line in enumerate(lines, 1):
        if body is None and line.strip() == "```c":
            body, start = [], number + 1
        elif body is not None and line.strip() == "```":
            found.append((start, body))
            body = None
        elif body is not None:
            body.append(line)
    return found


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    output, readme, name = sys.argv[1:]
    with open(readme, encoding="utf-8") as f:
        lines = f.read().split("\n")
    defining = [(start, body) for start, body in blocks(lines)
                if any(not l[:1].isspace() and name + "(" in l for l in body)]
    if len(defining) != 1:
        sys.exit(f"{readme}: {len(defining)} ```c blocks define {name}(), expected 1")
    start, body = defining[0]
    with open(output, "w", encoding="utf-8") as f:
        f.write(f'#line {start} "{readme}"\n' + "\n".join(body) + "\n")


if __name__ == "__main__":
    main()
