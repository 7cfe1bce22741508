#!/usr/bin/env python3
"""The scripted part of tools/repl_acceptance.sh's load, as RESP on stdout (for redis-cli --pipe).

Expiring keys (SET PX, SETEX, EXPIRE, GETEX, PERSIST), MULTI/EXEC, EVAL with writes, streams
with consumer groups (XREADGROUP, XACK, XCLAIM, XAUTOCLAIM, XTRIM, XDEL, XGROUP SETID), a few
commands Redis rewrites when it propagates them (INCRBYFLOAT, SPOP with a count, LMOVE), all
spread over databases 0, 3 and 9. Every TTL is at most 5 s. Seeded: the same stream every run.
"""

import random
import sys

r = random.Random(3)
out = []


def c(*a):
    s = b"*%d\r\n" % len(a)
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        s += b"$%d\r\n%s\r\n" % (len(x), x)
    out.append(s)


for db in (0, 3, 9):
    c("SELECT", db)
    c("XGROUP", "CREATE", "st", "g", "$", "MKSTREAM")
    c("XGROUP", "CREATE", "st", "g2", "0")
c("SELECT", 0)
db = 0
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 20000):
    if i % 997 == 0:
        db = (0, 3, 9)[r.randint(0, 2)]
        c("SELECT", db)
    k = r.randint(0, 2000)
    t = i % 16
    if t == 0:
        c("SET", f"ex:{k}", "v", "PX", r.randint(1, 3000))
    elif t == 1:
        c("MULTI")
        c("INCR", f"ctr:{k % 50}")
        c("LPUSH", f"ml:{k % 30}", i)
        c("EXPIRE", f"tx:{k % 20}", 3)
        c("SET", f"tx:{k % 20}", i, "KEEPTTL")
        c("EXEC")
    elif t == 2:
        c("EVAL", "redis.call('hset',KEYS[1],ARGV[1],ARGV[2]) return redis.call('hlen',KEYS[1])", 1,
          f"eh:{k % 40}", f"f{k}", i)
    elif t == 3:
        c("XADD", "st", "*", "n", i)
    elif t == 4:
        c("XREADGROUP", "GROUP", "g", f"c{k % 3}", "COUNT", 2, "STREAMS", "st", ">")
    elif t == 5:
        c("XACK", "st", "g", "0-1")
        c("XAUTOCLAIM", "st", "g", f"c{k % 3}", 0, "0-0", "COUNT", 3)
    elif t == 6:
        c("ZADD", f"z:{k % 60}", r.random(), f"m{k}")
    elif t == 7:
        c("SETEX", f"sx:{k}", r.randint(1, 5), "x")
    elif t == 8:
        c("INCRBYFLOAT", f"fl:{k % 30}", "1.5")
        c("GETEX", f"fl:{(k + 1) % 30}", "PX", r.randint(100, 4000))
    elif t == 9:
        c("SADD", f"s:{k % 25}", *[f"e{r.randint(0, 300)}" for _ in range(5)])
        c("SPOP", f"s:{k % 25}", 2)
    elif t == 10:
        c("RPUSH", f"l:{k % 25}", i, i + 1)
        c("LMOVE", f"l:{k % 25}", f"l:{(k + 1) % 25}", "LEFT", "RIGHT")
    elif t == 11:
        c("XREADGROUP", "GROUP", "g2", f"d{k % 4}", "COUNT", 3, "STREAMS", "st", ">")
        c("XCLAIM", "st", "g2", f"d{(k + 1) % 4}", 0, "0-0")
    elif t == 12:
        if i % 160 == 12:
            c("XTRIM", "st", "MAXLEN", 500)
        c("EVAL", "local n = redis.call('incr', KEYS[1]) if n % 2 == 0 then redis.call('pexpire', KEYS[1], 2000) end "
          "return n", 1, f"ev:{k % 10}")
    elif t == 13:
        c("HSET", f"h:{k % 30}", *[x for j in range(r.randint(1, 200)) for x in (f"f{j}", "v" * r.randint(1, 80))])
        c("PERSIST", f"h:{k % 30}")
    elif t == 14:
        c("MULTI")
        c("ZINCRBY", f"z:{k % 60}", 2, f"m{k}")
        c("ZPOPMIN", f"z:{(k + 7) % 60}")
        c("PEXPIRE", f"z:{(k + 11) % 60}", r.randint(100, 4000))
        c("EXEC")
    else:
        c("SET", f"big:{k % 10}", "x" * r.randint(1, 8000))
sys.stdout.buffer.write(b"".join(out))
