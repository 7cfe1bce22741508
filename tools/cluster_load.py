#!/usr/bin/env python3
"""A cluster client under load that keeps a model of what it wrote, for resharding tests.

usage: tools/cluster_load.py --seed HOST:PORT [--keys N] [--stop FILE] [--ready FILE]
                             [--seconds S] [--report FILE]

It first writes N keys (default 20000) spread over every slot, of every type: strings, lists,
hashes, sets, sorted sets and streams, half of each with a TTL (an hour or two, so none expires
during a run). Then it touches --ready FILE and, until --stop FILE exists (or --seconds pass),
mixes writes (new keys, and appends to existing ones: APPEND, RPUSH, HSET, SADD, ZADD, XADD)
with reads of random keys compared with the model. At the end it reads every key back: content,
type and TTL (PTTL > 0 where one was set, -1 where not).

It speaks RESP itself and follows the cluster as Redis's clients do: a slot map from CLUSTER
SLOTS, -MOVED (update the slot, reload the map), -ASK (ASKING then the command on the target),
-TRYAGAIN (wait a little, retry), -CLUSTERDOWN and a connection refused or reset (reload the map
from another node, retry). Those are counted (the summary's "redirections"); any other error reply, a key missing, a value
differing from the model, or a TTL lost is counted as an error and the first few are printed.
Exit status 0 when there were no errors. The last line is a one-line JSON summary.
"""
import argparse
import json
import os
import random
import socket
import sys
import time


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def key_slot(key):
    s = key.find(b"{")
    if s >= 0:
        e = key.find(b"}", s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    return crc16(key) % 16384


class ReplyError(Exception):
    pass


class Conn:
    def __init__(self, addr):
        host, port = addr
        self.sock = socket.create_connection((host, port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, *cmds):
        out = []
        for args in cmds:
            out.append(b"*%d\r\n" % len(args))
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest
        if t == b"-":
            return ReplyError(rest.decode(errors="replace"))
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ConnectionError("bad reply type %r" % line[:20])

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Cluster:
    def __init__(self, seed):
        self.seeds = [seed]
        self.slots = [None] * 16384
        self.conns = {}
        self.stats = {"moved": 0, "ask": 0, "tryagain": 0, "clusterdown": 0, "reconnect": 0, "map_reloads": 0}
        self.reload()

    def conn(self, addr):
        c = self.conns.get(addr)
        if c is None:
            c = Conn(addr)
            self.conns[addr] = c
        return c

    def drop(self, addr):
        c = self.conns.pop(addr, None)
        if c:
            c.close()

    def reload(self):
        self.stats["map_reloads"] += 1
        known = list(dict.fromkeys(self.seeds + [a for a in self.slots if a]))
        random.shuffle(known)
        last = None
        for addr in known:
            try:
                c = self.conn(addr)
                c.send(["CLUSTER", "SLOTS"])
                r = c.read()
                if isinstance(r, Exception):
                    raise r
            except (OSError, ConnectionError, ReplyError) as e:
                self.drop(addr)
                last = e
                continue
            if not r:
                # A node that serves nothing (reset by del-node, or just met): ask another.
                last = "no slots"
                continue
            for entry in r:
                lo, hi, master = entry[0], entry[1], entry[2]
                a = (master[0].decode(), master[1])
                for s in range(lo, hi + 1):
                    self.slots[s] = a
                if a not in self.seeds:
                    self.seeds.append(a)
            return
        raise ConnectionError("no node answers CLUSTER SLOTS: %s" % last)

    def call(self, *args):
        """Runs one command on the node serving its key (args[1]); follows redirections."""
        slot = key_slot(args[1] if isinstance(args[1], bytes) else str(args[1]).encode())
        asking = None
        for attempt in range(60):
            addr = asking or self.slots[slot]
            try:
                c = self.conn(addr)
                if asking:
                    c.send(["ASKING"], args)
                    ok = c.read()
                    if isinstance(ok, Exception):
                        raise ok
                else:
                    c.send(args)
                r = c.read()
            except (OSError, ConnectionError):
                self.stats["reconnect"] += 1
                self.drop(addr)
                time.sleep(0.05)
                asking = None
                self.reload()
                continue
            if isinstance(r, ReplyError):
                msg = str(r)
                if msg.startswith("MOVED "):
                    self.stats["moved"] += 1
                    host, port = msg.split()[2].rsplit(":", 1)
                    self.slots[slot] = (host, int(port))
                    asking = None
                    if attempt > 0:
                        self.reload()
                    continue
                if msg.startswith("ASK "):
                    self.stats["ask"] += 1
                    host, port = msg.split()[2].rsplit(":", 1)
                    asking = (host, int(port))
                    continue
                if msg.startswith("CLUSTERDOWN"):
                    # The node serves no slot any more (a reset, or a failover in progress):
                    # reload the map from the others and retry, as cluster clients do.
                    self.stats["clusterdown"] += 1
                    asking = None
                    time.sleep(0.1)
                    self.reload()
                    continue
                if msg.startswith("TRYAGAIN"):
                    self.stats["tryagain"] += 1
                    asking = None
                    time.sleep(0.02)
                    continue
            return r
        raise ReplyError("gave up after 60 redirections for %r" % (args,))


TYPES = ["string", "list", "hash", "set", "zset", "stream"]


class Load:
    def __init__(self, cl, rnd):
        self.cl = cl
        self.rnd = rnd
        self.model = {}  # key -> [type, value, has_ttl]
        self.errors = 0
        self.shown = 0
        self.ops = {"write": 0, "append": 0, "read": 0}

    def error(self, what):
        self.errors += 1
        if self.shown < 20:
            self.shown += 1
            print("ERROR:", what, flush=True)

    def checked(self, args, expect=None):
        try:
            r = self.cl.call(*args)
        except (ReplyError, ConnectionError, OSError) as e:
            self.error("%r: %s" % (args[:3], e))
            return None
        if isinstance(r, ReplyError):
            self.error("%r: -%s" % (args[:3], r))
            return None
        if expect is not None and r != expect:
            self.error("%r: got %r, expected %r" % (args[:3], r, expect))
        return r

    def create(self, i):
        t = TYPES[i % len(TYPES)]
        key = "%s:%d" % (t, i)
        ttl = (i // len(TYPES)) % 2 == 0
        if t == "string":
            v = "v%d-" % i + "x" * self.rnd.randint(0, 30)
            self.checked(["SET", key, v])
            val = v.encode()
        elif t == "list":
            items = [("%d-%d" % (i, j)).encode() for j in range(self.rnd.randint(1, 6))]
            self.checked(["RPUSH", key] + items)
            val = items
        elif t == "hash":
            fields = {("f%d" % j).encode(): ("%d" % (i * j)).encode() for j in range(self.rnd.randint(1, 6))}
            self.checked(["HSET", key] + [x for kv in fields.items() for x in kv])
            val = fields
        elif t == "set":
            members = {("m%d" % self.rnd.randint(0, 1000)).encode() for _ in range(self.rnd.randint(1, 6))}
            self.checked(["SADD", key] + sorted(members))
            val = members
        elif t == "zset":
            z = {("z%d" % j).encode(): self.rnd.randint(-100, 100) for j in range(self.rnd.randint(1, 6))}
            self.checked(["ZADD", key] + [x for m, s in z.items() for x in (s, m)])
            val = z
        else:
            val = []
            for j in range(self.rnd.randint(1, 4)):
                fields = [b"n", ("%d" % j).encode()]
                sid = self.checked(["XADD", key, "*"] + fields)
                if sid is not None:
                    val.append([sid, fields])
        if ttl:
            self.checked(["EXPIRE", key, self.rnd.randint(3600, 7200)], 1)
        self.model[key] = [t, val, ttl]
        self.ops["write"] += 1

    def append(self, key):
        t, val, _ = self.model[key]
        n = self.rnd.randint(0, 10**6)
        if t == "string":
            s = ("+%d" % n).encode()
            r = self.checked(["APPEND", key, s])
            self.model[key][1] = val + s
            if r is not None and r != len(val) + len(s):
                self.error("APPEND %s returned %r, model length %d" % (key, r, len(val) + len(s)))
        elif t == "list":
            item = ("a%d" % n).encode()
            self.checked(["RPUSH", key, item], len(val) + 1)
            val.append(item)
        elif t == "hash":
            f = ("g%d" % n).encode()
            new = 0 if f in val else 1
            self.checked(["HSET", key, f, "1"], new)
            val[f] = b"1"
        elif t == "set":
            m = ("m%d" % (n % 1000)).encode()
            new = 0 if m in val else 1
            self.checked(["SADD", key, m], new)
            val.add(m)
        elif t == "zset":
            m = ("y%d" % (n % 50)).encode()
            new = 0 if m in val else 1
            self.checked(["ZADD", key, n % 97, m], new)
            val[m] = n % 97
        else:
            fields = [b"a", ("%d" % n).encode()]
            sid = self.checked(["XADD", key, "*"] + fields)
            if sid is not None:
                val.append([sid, fields])
        self.ops["append"] += 1

    def verify(self, key, with_ttl=False):
        t, val, ttl = self.model[key]
        if t == "string":
            r = self.checked(["GET", key])
            got, want = r, val
        elif t == "list":
            got, want = self.checked(["LRANGE", key, 0, -1]), val
        elif t == "hash":
            r = self.checked(["HGETALL", key])
            got = None if r is None else dict(zip(r[0::2], r[1::2]))
            want = val
        elif t == "set":
            r = self.checked(["SMEMBERS", key])
            got, want = (None if r is None else set(r)), val
        elif t == "zset":
            r = self.checked(["ZRANGE", key, 0, -1, "WITHSCORES"])
            got = None if r is None else {m: int(float(s)) for m, s in zip(r[0::2], r[1::2])}
            want = val
        else:
            got, want = self.checked(["XRANGE", key, "-", "+"]), val
        self.ops["read"] += 1
        if got != want:
            self.error("%s (%s): got %.200r, model %.200r" % (key, t, got, want))
        if with_ttl:
            p = self.checked(["PTTL", key])
            if p is not None and ((ttl and p <= 0) or (not ttl and p != -1)):
                self.error("%s: PTTL %r, model %s" % (key, p, "a TTL" if ttl else "no TTL"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", required=True)
    ap.add_argument("--keys", type=int, default=20000)
    ap.add_argument("--stop")
    ap.add_argument("--ready")
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--report")
    a = ap.parse_args()
    host, port = a.seed.rsplit(":", 1)
    rnd = random.Random(19)
    cl = Cluster((host, int(port)))
    load = Load(cl, rnd)
    t0 = time.time()
    for i in range(a.keys):
        load.create(i)
    print("populated %d keys in %.1f s" % (a.keys, time.time() - t0), flush=True)
    if a.ready:
        open(a.ready, "w").close()
    i = a.keys
    t1 = time.time()
    last = t1
    while True:
        if a.stop and os.path.exists(a.stop):
            break
        if a.seconds and time.time() - t1 > a.seconds:
            break
        op = rnd.random()
        if op < 0.3:
            load.create(i)
            i += 1
        elif op < 0.6:
            k = rnd.randrange(i)
            load.append("%s:%d" % (TYPES[k % len(TYPES)], k))
        else:
            k = rnd.randrange(i)
            load.verify("%s:%d" % (TYPES[k % len(TYPES)], k))
        if time.time() - last > 10:
            last = time.time()
            print("%.0fs: keys %d, ops %s, redirections %s, errors %d"
                  % (last - t1, len(load.model), load.ops, cl.stats, load.errors), flush=True)
    under_load = dict(load.ops)
    for key in list(load.model):
        load.verify(key, with_ttl=True)
    summary = {"keys": len(load.model), "ops_under_load": under_load,
               "final_reads": load.ops["read"] - under_load["read"], "redirections": cl.stats,
               "errors": load.errors, "seconds": round(time.time() - t0, 1)}
    line = json.dumps(summary)
    print(line, flush=True)
    if a.report:
        with open(a.report, "w") as f:
            f.write(line + "\n")
    sys.exit(1 if load.errors else 0)


if __name__ == "__main__":
    main()
