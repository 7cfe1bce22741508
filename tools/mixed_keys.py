#!/usr/bin/env python3
"""Writes N keys of mixed types as RESP commands on stdout, for `redis-cli --pipe`.

usage: tools/mixed_keys.py [N] > data.resp      (N defaults to 1000000)

Per 10 keys: 4 short strings, 1 integer string, 1 hash (4 fields), 1 list (5 items), 1 set
(6 members), 1 zset (4 members), 1 string with a TTL far away. Seeded: the same file each time.
"""
import random
import sys


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    rnd = random.Random(7)
    out = sys.stdout.buffer

    def cmd(*args):
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
        out.write(b"".join(parts))

    for i in range(n):
        t = i % 10
        if t < 4:
            cmd("SET", f"str:{i}", "v" * rnd.randint(5, 40))
        elif t == 4:
            cmd("SET", f"int:{i}", rnd.randint(0, 10**9))
        elif t == 5:
            cmd("HSET", f"hash:{i}", "f1", i, "f2", "hello", "f3", "world" * 3, "f4", 42)
        elif t == 6:
            cmd("RPUSH", f"list:{i}", "a", "bb", i, "dddd", "e" * 10)
        elif t == 7:
            cmd("SADD", f"set:{i}", 1, 2, 3, i, "x", "yy")
        elif t == 8:
            cmd("ZADD", f"zset:{i}", 1, "a", 2.5, "b", 3, i, 4, "d")
        else:
            cmd("SET", f"exp:{i}", "value", "EX", 100000)


if __name__ == "__main__":
    main()
