#!/usr/bin/env python3
"""Compares every key of a master with its replicas (issue 18 acceptance 1, tools/repl_acceptance.sh).

    tools/repl_compare.py F:PORT R:PORT ...    the first node is the master; F = ferrodis, R = redis

For every database the master's INFO keyspace lists, DBSIZE must match on every node, and every
key the master's SCAN returns must have, on every node: the same TYPE, the same PEXPIRETIME (the
master propagates absolute expiry times), and the same value read type by type (strings, list
ranges, sorted hash fields and set members, zset members with scores, stream entries, groups with
their last-delivered ID and pending entries with consumer and delivery count).

Each replica's DUMP of the key is compared with the master's too. It is byte-exact for every encoding whose serialization the commands alone
decide; for `hashtable` sets and hashes the order is a hash table's iteration order, and a stream's
payload carries consumers' seen-times and PEL delivery times each node stamps itself, and between
ferrodis and redis a quicklist's node boundaries differ (see LAYOUT_FREE): there a DUMP
difference is counted and listed but only the value compare decides.
Exits 1 on any difference, printing the first ones.
"""

import socket
import sys


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def pipeline(self, cmds):
        out = bytearray()
        for args in cmds:
            out += b"*%d\r\n" % len(args)
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return [self.read() for _ in cmds]

    def __call__(self, *args):
        return self.pipeline([args])[0]

    def read(self):
        line = self.f.readline()
        if not line:
            raise EOFError("connection closed")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest
        if t == b"-":
            return ("ERR", rest)
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ValueError("unexpected reply %r" % line)


def first_diff(a, b, path=""):
    """Where two nested values first differ, as a short text."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_diff(x, y, "%s[%d]" % (path, i))
        if len(a) != len(b):
            return "%s: length %d against %d" % (path, len(b), len(a))
    return "%s: %s against the master's %s" % (path, repr(b)[:200], repr(a)[:200])


def pairs(flat):
    return list(zip(flat[0::2], flat[1::2]))


def value(c, key, typ):
    """The key's value, in a form that does not depend on the encoding."""
    if typ == b"string":
        return c("GET", key)
    if typ == b"list":
        return c("LRANGE", key, 0, -1)
    if typ == b"hash":
        return sorted(pairs(c("HGETALL", key)))
    if typ == b"set":
        return sorted(c("SMEMBERS", key))
    if typ == b"zset":
        return c("ZRANGE", key, 0, -1, "WITHSCORES")
    if typ == b"stream":
        info = dict(pairs(c("XINFO", "STREAM", key)))
        meta = [info.get(f) for f in (b"length", b"last-generated-id", b"max-deleted-entry-id", b"entries-added",
                                      b"recorded-first-entry-id", b"groups")]
        groups = []
        for g in c("XINFO", "GROUPS", key):
            g = dict(pairs(g))
            name = g[b"name"]
            pel = c("XPENDING", key, name, "-", "+", 1 << 30)
            # Idle times are each node's own clock; ID, owner and delivery count are replicated.
            pel = [(e[0], e[1], e[3]) for e in pel]
            consumers = sorted((dict(pairs(x))[b"name"], dict(pairs(x))[b"pending"])
                               for x in c("XINFO", "CONSUMERS", key, name))
            # Not entries-read (nor lag): Redis 7.0 does not propagate it, its own replicas
            # report nil where the master counts.
            groups.append((name, g.get(b"last-delivered-id"), g.get(b"pending"), pel, consumers))
        return (meta, c("XRANGE", key, "-", "+"), sorted(groups))
    return ("unknown type", typ)


ORDER_FREE = {b"hashtable", b"stream"}
# Between ferrodis and redis only: a quicklist's node boundaries are each implementation's own
# (ferrodis packs its nodes differently after the same pushes and pops); the values still agree.
LAYOUT_FREE = {b"quicklist"}


def main():
    nodes = []
    for spec in sys.argv[1:]:
        kind, port = spec.split(":")
        nodes.append((kind, int(port), Conn(int(port))))
    mkind, mport, m = nodes[0]
    dbs = []
    for line in m("INFO", "keyspace").decode().splitlines():
        if line.startswith("db"):
            dbs.append(int(line.split(":")[0][2:]))
    problems = []
    checked = 0
    dump_equal = 0
    dump_differs = {}
    for db in dbs:
        for _, _, c in nodes:
            c("SELECT", db)
        sizes = [c("DBSIZE") for _, _, c in nodes]
        print("db%d dbsize %s" % (db, " ".join(map(str, sizes))))
        if len(set(sizes)) != 1:
            problems.append("db%d: dbsize differs %s" % (db, sizes))
        cursor = b"0"
        while True:
            cursor, keys = m("SCAN", cursor, "COUNT", 1000)
            for key in keys:
                checked += 1
                ref = None
                master_dump = None
                for kind, port, c in nodes:
                    typ, pexp, enc, dump = c.pipeline([("TYPE", key), ("PEXPIRETIME", key),
                                                       ("OBJECT", "ENCODING", key), ("DUMP", key)])
                    got = (typ, pexp, value(c, key, typ))
                    if ref is None:
                        ref, master_dump = got, dump
                        continue
                    if got != ref:
                        problems.append("db%d key %r on %s:%d: %s" % (db, key, kind, port, first_diff(ref, got)))
                    if dump == master_dump:
                        dump_equal += 1
                    elif enc in ORDER_FREE or (kind != mkind and enc in LAYOUT_FREE):
                        note = enc if kind == mkind else enc + b" across implementations"
                        dump_differs[note] = dump_differs.get(note, 0) + 1
                    else:
                        problems.append("db%d key %r (%s): DUMP differs on %s:%d" % (db, key, enc, kind, port))
            if cursor == b"0":
                break
    print("compare: %d keys in dbs %s; replica DUMPs equal to the master's %d, differing where order-free %s; "
          "problems %d" % (checked, dbs, dump_equal, dump_differs, len(problems)))
    for p in problems[:20]:
        print("  " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
