#!/usr/bin/env python3
"""check-answers.py ANSWERS-PROGRAM SOURCE-ROOT: the manuals' status tables against the
gateway's answer table (tools/idem-gateway/answer.h, printed as JSON by ANSWERS-PROGRAM):

- tools/idem-gateway/README.md, "Statuses": one row per answer the HTTP API gives, with its
  HTTP status, problem type, Retry-After and next step as the table has them;
- the same manual's MCP results: isError for every status but created and replayed (and an
  allocation);
- README.md and lib/README.md, "Statuses": the same statuses as idem's in the table, and the
  same next step for each in both.
Prints one line per disagreement; exit 1 when there is any."""
import json
import re
import subprocess
import sys
from pathlib import Path

answers = json.loads(subprocess.run([sys.argv[1]], check=True, capture_output=True,
                                    text=True).stdout)
root = Path(sys.argv[2])
problems = []


def table_after(text, heading, columns):
    """The rows (lists of cells) of the first table after HEADING whose header starts with
    COLUMNS."""
    at = text.index(heading)
    lines = text[at:].splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[:len(columns)] == columns:
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    return rows
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
            return rows
    raise SystemExit(f"check-answers: no table {columns} after {heading!r}")


gateway = (root / "tools/idem-gateway/README.md").read_text()
rows = table_after(gateway, "\n### Statuses", ["status", "HTTP"])
by_name = {}
for r in rows:
    name = re.sub(r" \(.*", "", r[0])
    by_name[name] = r
for a in answers:
    if a["http"] == 0:
        continue  # MCP's alone (an allocation)
    r = by_name.pop(a["name"], None)
    if r is None:
        problems.append(f"gateway manual: no row for {a['name']}")
        continue
    code = re.search(r"\b\d{3}\b", r[1])
    if code is None or int(code.group()) != a["http"]:
        problems.append(f"gateway manual: {a['name']}: HTTP {r[1]!r}, the table says {a['http']}")
    if a["problem"] is not None and f"problem `{a['problem']}`" not in r[2]:
        problems.append(f"gateway manual: {a['name']}: body {r[2][:60]!r}..., the table says "
                        f"problem `{a['problem']}`")
    if a["problem"] is None and "problem `" in r[2]:
        problems.append(f"gateway manual: {a['name']}: a problem, the table says the receipt")
    says_retry = "`Retry-After`" in r[3] and "no `Retry-After`" not in r[3]
    if says_retry != a["retry_after"]:
        problems.append(f"gateway manual: {a['name']}: headers {r[3]!r}, the table says "
                        f"Retry-After {a['retry_after']}")
    if r[4] != a["next"]:
        problems.append(f"gateway manual: {a['name']}: next step {r[4]!r}, the table says "
                        f"{a['next']!r}")
for name in by_name:
    problems.append(f"gateway manual: row {name!r} is no answer of the table")

not_errors = sorted(a["status"] for a in answers if not a["is_error"])
if not_errors != ["allocated", "created", "replayed"]:
    problems.append(f"the table's results without isError: {not_errors}")
if "`isError: true` for\nevery status but `created` and `replayed`" not in gateway:
    problems.append("gateway manual: the MCP results no longer say which statuses are errors")

# The gateway's own words: an ID allocated, none sent, a tenant over its budget.
idem_statuses = {a["status"] for a in answers} - {"allocated", "operation_id_required",
                                                   "rate_limited"}
steps = {}
for doc in ("README.md", "lib/README.md"):
    text = (root / doc).read_text()
    rows = table_after(text, "| status | meaning |", ["status", "meaning", "caller's next step"])
    names = {r[0] for r in rows}
    if names != idem_statuses:
        problems.append(f"{doc}: statuses {sorted(names)}, the table's are "
                        f"{sorted(idem_statuses)}")
    for r in rows:
        if steps.setdefault(r[0], r[2]) != r[2]:
            problems.append(f"{doc}: {r[0]}: next step {r[2]!r}, README.md says {steps[r[0]]!r}")

for p in problems:
    print("FAIL:", p)
print(f"{len(answers)} answers; {len(problems)} disagreements")
sys.exit(1 if problems else 0)
