#!/usr/bin/env python3
"""Seeds the commands fuzz corpus from the differential test scripts (tests/differential/*.txt):
their command lines, split as redis-cli splits them (shlex), joined by single spaces (the
target's word separator), up to 40 lines per seed. Lines whose words hold a space or a newline
are left out: the target's format cannot carry them. One more seed runs each of the target's
scripts (`eval`) once.

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
# The target's `eval` runs its script number (first byte of the next word) modulo 20: b"<" is 0.
evals = [
    rb'{"a":[1,2,{"b":null}],"c":1.5e300,"d":"\u00e9\n"}',
    rb'[1,"x",true,false,{},[],-0.0,1e-320]',
    b"\x93\x01\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00\xa2ab",
    b"\x82\xa1a\x01\xa1b\x92\xc0\xc3",
    b"<i4s2Bh \x01\x00\x00\x00abc\x05\xff\xff",
    b">I2c0 258 hello",
    b"<!4bhilfd",
    b"1 k set k v",
    b"hset h f 1 g 2",
    b"hgetall h",
    b"abc",
    b"-1 4",
    b"%5.2f|%-3s|%q 3.14159 x",
    b"0x1p4",
    b"\x91\xce\xff\xff\xff\xff",
    rb'{"k":[1,2.5,"s"]}',
    b"OK",
    b"ERR",
    b"1 k",
    b"1 k [1,2,3]",
]
lines = []
for i, rest in enumerate(evals):
    keys = b"" if rest[:2] == b"1 " else b"0 "
    lines.append(b"eval " + bytes([ord("<") + i]) + b" " + keys + rest)
with open(os.path.join(out, "eval-scripts"), "wb") as f:
    f.write(b"\n".join([b"SET k v", b"HSET h f v"] + lines + [b"GET k"]))
n += 1
print(f"{n} seeds in {out}")
