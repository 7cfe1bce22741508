#!/usr/bin/env python3
"""Seeds the commands fuzz corpus from the differential test scripts (tests/differential/*.txt):
their command lines, split as redis-cli splits them (shlex), joined by single spaces (the
target's word separator), up to 40 lines per seed. Lines whose words hold a space or a newline
are left out: the target's format cannot carry them.

  fuzz/seed_commands.py DIFFERENTIAL_DIR OUT_DIR
"""
import os, shlex, sys

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
n = 0
for name in sorted(os.listdir(src)):
    if not name.endswith(".txt"):
        continue
    lines = []
    for raw in open(os.path.join(src, name), encoding="utf-8", errors="replace"):
        raw = raw.strip()
        if not raw or raw[0] in "#@!":
            continue
        try:
            words = shlex.split(raw)
        except ValueError:
            continue
        if words and not any(c in w for w in words for c in " \n"):
            lines.append(" ".join(words))
    for i in range(0, len(lines), 40):
        with open(os.path.join(out, f"{name[:-4]}-{i // 40}"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines[i : i + 40]))
        n += 1
print(f"{n} seeds in {out}")
