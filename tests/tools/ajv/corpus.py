#!/usr/bin/env python3
"""corpus.py N SEED: N pairs of a schema of the gateway's JSON Schema subset
(tools/common/schema.h) and an instance, one JSON object per line:
{"schema": ..., "instance": ...}. Instances are drawn near their schema (its enum and const
values, its bounds and one past them, its members with one missing or one more), so that
both verdicts are frequent."""
import json
import random
import sys

TYPES = ["object", "array", "string", "integer", "number", "boolean", "null"]
STRINGS = ["", "a", "ab", "abc", "héllo", "😀", "😀😀x", "a/b", "~0", "x" * 12]
NAMES = ["a", "b", "c", "a/b", "m~n", ""]


def number(r):
    return r.choice([0, 1, -1, 2, 3, 7, 10, 2.5, -0.5, 1.0, 1e3, 1e300, 0.1, 9007199254740992])


def value(r, depth=0):
    kind = r.choice(TYPES if depth < 2 else TYPES[2:])
    if kind == "object":
        return {r.choice(NAMES): value(r, depth + 1) for _ in range(r.randint(0, 3))}
    if kind == "array":
        return [value(r, depth + 1) for _ in range(r.randint(0, 4))]
    if kind == "string":
        return r.choice(STRINGS)
    if kind in ("integer", "number"):
        return number(r)
    if kind == "boolean":
        return r.choice([True, False])
    return None


def schema(r, depth=0):
    if r.random() < 0.08:
        return r.choice([True, False])
    s = {}
    if r.random() < 0.6:
        s["type"] = r.choice(TYPES) if r.random() < 0.8 else r.sample(TYPES, r.randint(1, 3))
    if r.random() < 0.15:
        s["enum"] = [value(r, depth + 1) for _ in range(r.randint(1, 4))]
    if r.random() < 0.08:
        s["const"] = value(r, depth + 1)
    for k in ("minimum", "maximum"):
        if r.random() < 0.2:
            s[k] = number(r)
    for k in ("minLength", "maxLength", "maxItems"):
        if r.random() < 0.2:
            s[k] = r.randint(0, 4)
    if depth < 3 and r.random() < 0.35:
        s["properties"] = {n: schema(r, depth + 1) for n in r.sample(NAMES, r.randint(0, 3))}
    if r.random() < 0.25:
        # Not "": ajv 8.17.1 takes {"required": [""]} as met by {} (node: new
        # Ajv2020().validate({required: [""]}, {}) is true), where JSON Schema requires the
        # member named "" to be present, as the gateway does.
        s["required"] = r.sample(NAMES[:-1], r.randint(0, 3))
    if depth < 3 and r.random() < 0.25:
        s["additionalProperties"] = schema(r, depth + 1)
    if depth < 3 and r.random() < 0.3:
        s["items"] = schema(r, depth + 1)
    if r.random() < 0.1:
        s["description"] = "annotation"
    return s


def near(r, s, depth=0):
    """An instance drawn from what @s mentions, valid or nearly."""
    if not isinstance(s, dict) or depth > 3 or r.random() < 0.15:
        return value(r, depth)
    if "enum" in s and r.random() < 0.6:
        return r.choice(s["enum"])
    if "const" in s and r.random() < 0.6:
        return s["const"]
    t = s.get("type")
    t = r.choice(t) if isinstance(t, list) else t
    if t == "object" or (t is None and ("properties" in s or "required" in s)):
        names = list(dict.fromkeys(list(s.get("properties", {})) + list(s.get("required", []))))
        if r.random() < 0.3:
            names.append(r.choice(NAMES))
        if names and r.random() < 0.3:
            names.remove(r.choice(names))
        props = s.get("properties", {})
        return {n: near(r, props.get(n, s.get("additionalProperties", True)), depth + 1)
                for n in names}
    if t == "array" or (t is None and "items" in s):
        n = s.get("maxItems", 3) + r.choice([-1, 0, 0, 1])
        return [near(r, s.get("items", True), depth + 1) for _ in range(max(n, 0))]
    if t == "string":
        return r.choice(STRINGS)
    if t in ("integer", "number"):
        bound = s.get("minimum", s.get("maximum"))
        if bound is not None and r.random() < 0.7:
            return bound + r.choice([-1, -0.5, 0, 0.5, 1])
        return number(r)
    return value(r, depth)


def main():
    n, seed = int(sys.argv[1]), int(sys.argv[2])
    r = random.Random(seed)
    for _ in range(n):
        s = schema(r)
        print(json.dumps({"schema": s, "instance": near(r, s)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
