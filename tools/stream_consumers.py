#!/usr/bin/env python3
"""Consumer-group drain benchmark: real redis-server and ferrodis side by side.

Starts each server on a free port (no persistence), fills stream `s` with N entries by
pipelined XADD, creates group `g`, then runs C consumer threads, each on its own socket,
looping `XREADGROUP GROUP g c<i> COUNT <batch> STREAMS s >` followed by `XACK` of every ID
it got, until the group is drained (a nil reply). Then it checks that every entry was
delivered exactly once (no duplicates, none lost), that every XACK acknowledged all it was
given and that the group's PEL is empty, and prints seconds and entries/s per server and
the ferrodis/redis throughput ratio.

Stdlib only. Client-side parsing is a regular expression over the raw reply bytes (the
entry shape is fixed: one field `f` whose value is the entry's sequence number), so the
Python client costs little next to the servers.

    python3 tools/stream_consumers.py [--n 1000000] [--consumers 50] [--batch 100]
        [--ferrodis target/release/ferrodis-server] [--redis /usr/bin/redis-server]
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import threading
import time

ENTRY = re.compile(rb"\*2\r\n\$\d+\r\n(\d+-\d+)\r\n\*2\r\n\$1\r\nf\r\n\$\d+\r\n(\d+)\r\n")
HEADER = re.compile(rb"\*1\r\n\*2\r\n\$1\r\ns\r\n\*(\d+)\r\n")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def encode(*argv):
    out = [b"*%d\r\n" % len(argv)]
    for a in argv:
        if not isinstance(a, bytes):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self.fill()

    def simple(self, *argv):
        """Sends one command whose reply is a single line (status, error, integer)."""
        self.sock.sendall(encode(*argv))
        return self.line()

    def close(self):
        self.sock.close()


def start(name, argv, port):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            c = Conn(port)
            if c.simple("PING") == b"+PONG":
                c.close()
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit(f"{name} did not start on port {port}")


def fill_stream(port, n):
    c = Conn(port)
    c.simple("DEL", "s")
    step = 10000
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        c.sock.sendall(b"".join(encode("XADD", "s", "*", "f", i) for i in range(lo, hi)))
        want = 2 * (hi - lo)  # each reply is `$len\r\nID\r\n`
        while c.buf.count(b"\r\n") < want:
            c.fill()
        if b"-" in c.buf[:1] or b"\r\n-" in c.buf:
            sys.exit(f"XADD failed: {c.buf[:200]!r}")
        c.buf = b""
    assert c.simple("XLEN", "s") == b":%d" % n
    assert c.simple("XGROUP", "CREATE", "s", "g", "0") == b"+OK"
    c.close()


def consumer(port, name, batch, ids_out, vals_out, errors, start_evt):
    try:
        c = Conn(port)
        read = encode("XREADGROUP", "GROUP", "g", name, "COUNT", batch, "STREAMS", "s", ">")
        ids, vals = [], []
        start_evt.wait()
        while True:
            c.sock.sendall(read)
            while b"\r\n" not in c.buf:
                c.fill()
            if c.buf.startswith(b"*-1\r\n"):
                c.buf = c.buf[5:]
                break
            while True:
                m = HEADER.match(c.buf)
                if m:
                    break
                if c.buf.startswith(b"-"):
                    raise RuntimeError(c.line())
                c.fill()
            k = int(m.group(1))
            pos = m.end()
            got = []
            while True:
                got = ENTRY.findall(c.buf, pos)
                if len(got) >= k:
                    break
                c.fill()
            assert len(got) == k, f"{name}: parsed {len(got)} entries, header said {k}"
            # The reply is complete: everything in the buffer belongs to it.
            c.buf = b""
            batch_ids = [g[0] for g in got]
            ids.extend(batch_ids)
            vals.extend(g[1] for g in got)
            acked = c.simple(b"XACK", b"s", b"g", *batch_ids)
            if acked != b":%d" % k:
                raise RuntimeError(f"{name}: XACK of {k} ids answered {acked!r}")
        ids_out.append(ids)
        vals_out.append(vals)
        c.close()
    except Exception as e:  # reported by the main thread
        errors.append(f"{name}: {e!r}")


def drain(port, n, consumers, batch):
    ids_out, vals_out, errors = [], [], []
    start_evt = threading.Event()
    threads = [
        threading.Thread(target=consumer, args=(port, f"c{i}", batch, ids_out, vals_out, errors, start_evt))
        for i in range(consumers)
    ]
    for t in threads:
        t.start()
    time.sleep(0.2)  # let every consumer connect before the clock starts
    t0 = time.perf_counter()
    start_evt.set()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    if errors:
        sys.exit("consumer errors:\n  " + "\n  ".join(errors[:10]))

    all_ids = [i for ids in ids_out for i in ids]
    all_vals = [v for vals in vals_out for v in vals]
    problems = []
    if len(all_ids) != n:
        problems.append(f"{len(all_ids)} deliveries for {n} entries")
    uniq = set(all_ids)
    if len(uniq) != len(all_ids):
        problems.append(f"{len(all_ids) - len(uniq)} entries delivered more than once")
    vals = set(int(v) for v in all_vals)
    missing = n - len(vals & set(range(n)))
    if missing:
        problems.append(f"{missing} entries never delivered")
    c = Conn(port)
    c.sock.sendall(encode("XPENDING", "s", "g"))
    c.line()  # `*4`: the summary's count comes next
    count = c.line()
    if count != b":0":
        problems.append(f"PEL not empty after draining: XPENDING count {count!r}")
    c.close()
    per = [len(ids) for ids in ids_out]
    return secs, problems, (min(per), max(per))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--consumers", type=int, default=50)
    ap.add_argument("--batch", type=int, default=100)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--ferrodis", default=os.path.join(root, "target/release/ferrodis-server"))
    ap.add_argument("--redis", default="/usr/bin/redis-server")
    ap.add_argument("--only", choices=["redis", "ferrodis"], help="run one server only")
    a = ap.parse_args()

    servers = [
        ("redis", lambda p: [a.redis, "--port", str(p), "--save", "", "--appendonly", "no"]),
        ("ferrodis", lambda p: [a.ferrodis, "--port", str(p), "--save", ""]),
    ]
    results = {}
    failed = False
    for name, argv in servers:
        if a.only and a.only != name:
            continue
        port = free_port()
        proc = start(name, argv(port), port)
        try:
            t0 = time.perf_counter()
            fill_stream(port, a.n)
            fill = time.perf_counter() - t0
            secs, problems, (lo, hi) = drain(port, a.n, a.consumers, a.batch)
        finally:
            proc.terminate()
            proc.wait()
        rate = a.n / secs
        results[name] = rate
        print(
            f"{name:9} fill {fill:6.2f}s  drain {secs:6.2f}s  {rate:12,.0f} entries/s  "
            f"(per consumer {lo}..{hi})  {'OK' if not problems else 'FAIL: ' + '; '.join(problems)}"
        )
        failed |= bool(problems)
    if "redis" in results and "ferrodis" in results:
        print(f"ratio ferrodis/redis: {results['ferrodis'] / results['redis']:.2f}x")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
