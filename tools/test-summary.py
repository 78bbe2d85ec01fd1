#!/usr/bin/env python3
"""Sum the test results of one or more meson build directories.

Reads DIR/meson-logs/testlog.json. A Criterion executable counts as the tests it ran
(its "Synthesis" line); any other test counts as one. Prints a table per directory and,
last, "N passed, N failed" on a line of its own. Exit 1 if anything failed or nothing ran.
"""
import json
import os
import re
import sys

SYNTH = re.compile(r"Synthesis: Tested: +(\d+) \| Passing: +(\d+) \| Failing: +(\d+) \| Crashing: +(\d+)")
SKIP = re.compile(r"\[SKIP\]")


def count(directory):
    logs = os.path.join(directory, "meson-logs")
    # meson names the log after the test setup; the newest one is this run's.
    candidates = [os.path.join(logs, n) for n in os.listdir(logs)
                  if n.startswith("testlog") and n.endswith(".json")]
    path = max(candidates, key=os.path.getmtime)
    passed = failed = skipped = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            t = json.loads(line)
            out = (t.get("stdout") or "") + (t.get("stderr") or "")
            ok = t.get("result") in ("OK", "EXPECTEDFAIL")
            m = SYNTH.search(out)
            if m:
                tested, passing, failing, crashing = map(int, m.groups())
                skip = len(SKIP.findall(out))
                passed += passing
                failed += failing + crashing
                skipped += skip
                if not ok and failing + crashing == 0:
                    failed += 1  # the executable failed outside any test
            elif t.get("result") == "SKIP":
                skipped += 1
            elif ok:
                passed += 1
            else:
                failed += 1
    return passed, failed, skipped


def main():
    total_p = total_f = total_s = 0
    for d in sys.argv[1:]:
        p, f, s = count(d)
        print("%-14s %5d passed, %d failed, %d skipped" % (d + ":", p, f, s))
        total_p, total_f, total_s = total_p + p, total_f + f, total_s + s
    print("%d passed, %d failed, %d skipped" % (total_p, total_f, total_s))
    sys.exit(1 if total_f or total_p == 0 else 0)


if __name__ == "__main__":
    main()
