#!/usr/bin/env python3
"""Pub/sub fan-out benchmark: one publisher, N subscribers (half of them by pattern), M messages.

Starts each server in turn (real redis-server, then ferrodis), counts every message delivered to
every subscriber, and reads the server's CPU time (user+sys from /proc/<pid>/stat) over the run,
reporting CPU microseconds per delivered message and ferrodis/redis ratio.

    tools/fanout.py --ferrodis target/release/ferrodis-server [--redis /usr/bin/redis-server]
                    [--port 7620] [--subs 100] [--patterns 50] [--messages 100000] [--size 100]

Subscribers count bytes, not frames: every frame of a run has the same length (fixed channel,
pattern and payload), so bytes / frame length is the number of messages, which keeps a Python
reader fast enough not to be the bottleneck.
"""

import argparse
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time

CHANNEL = b"fanout:ch"
PATTERN = b"fanout:*"


def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def bulk(b):
    return b"$%d\r\n%s\r\n" % (len(b), b)


def frame_len(by_pattern, size):
    payload = b"x" * size
    if by_pattern:
        return len(b"*4\r\n" + bulk(b"pmessage") + bulk(PATTERN) + bulk(CHANNEL) + bulk(payload))
    return len(b"*3\r\n" + bulk(b"message") + bulk(CHANNEL) + bulk(payload))


def read_exact_reply(sock, n_bytes):
    buf = b""
    while len(buf) < n_bytes:
        d = sock.recv(n_bytes - len(buf))
        if not d:
            raise ConnectionError("closed")
        buf += d
    return buf


def subscriber_group(port, kinds, size, expected, ready, result):
    """Runs a group of subscriber sockets in one process; reports delivered message counts."""
    import selectors

    sel = selectors.DefaultSelector()
    socks = []
    for by_pattern in kinds:
        s = socket.create_connection(("127.0.0.1", port))
        if by_pattern:
            s.sendall(enc("PSUBSCRIBE", PATTERN))
            confirm = b"*3\r\n" + bulk(b"psubscribe") + bulk(PATTERN) + b":1\r\n"
        else:
            s.sendall(enc("SUBSCRIBE", CHANNEL))
            confirm = b"*3\r\n" + bulk(b"subscribe") + bulk(CHANNEL) + b":1\r\n"
        read_exact_reply(s, len(confirm))
        s.setblocking(False)
        socks.append([s, frame_len(by_pattern, size), 0])
        sel.register(s, selectors.EVENT_READ, len(socks) - 1)
    ready.release()
    want = [expected * f for _, f, _ in socks]
    done = 0
    deadline = None
    while done < len(socks):
        events = sel.select(timeout=1.0)
        if not events:
            if deadline is None:
                deadline = time.time() + 5
            elif time.time() > deadline:
                break
            continue
        deadline = None
        for key, _ in events:
            i = key.data
            try:
                d = socks[i][0].recv(1 << 20)
            except BlockingIOError:
                continue
            if not d:
                sel.unregister(socks[i][0])
                done += 1
                continue
            socks[i][2] += len(d)
            if socks[i][2] >= want[i]:
                sel.unregister(socks[i][0])
                done += 1
    result.put([b // f for _, f, b in socks])
    for s, _, _ in socks:
        s.close()


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_port(port, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def run_one(name, argv, port, args):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_port(port):
            raise RuntimeError(f"{name} did not start")
        ctl = socket.create_connection(("127.0.0.1", port))
        # Slow Python readers must not be dropped by the pubsub output buffer limit.
        ctl.sendall(enc("CONFIG", "SET", "client-output-buffer-limit", "pubsub 0 0 0"))
        read_exact_reply(ctl, 5)
        kinds = [i < args.patterns for i in range(args.subs)]
        groups = [kinds[i :: args.procs] for i in range(args.procs)]
        ready = mp.Semaphore(0)
        result = mp.Queue()
        procs = [
            mp.Process(target=subscriber_group, args=(port, g, args.size, args.messages, ready, result))
            for g in groups
            if g
        ]
        for p in procs:
            p.start()
        for _ in procs:
            ready.acquire()
        payload = b"x" * args.size
        one = enc("PUBLISH", CHANNEL, payload)
        reply = b":%d\r\n" % args.subs
        batch = 500
        cpu0 = cpu_ticks(proc.pid)
        t0 = time.time()
        pub = socket.create_connection(("127.0.0.1", port))
        sent = 0
        peak_rss = 0
        while sent < args.messages:
            n = min(batch, args.messages - sent)
            pub.sendall(one * n)
            got = read_exact_reply(pub, len(reply) * n)
            if got != reply * n:
                print(f"{name}: unexpected PUBLISH replies: {got[:40]!r}", file=sys.stderr)
            sent += n
            if sent % (batch * 20) == 0:
                peak_rss = max(peak_rss, rss_kb(proc.pid))
        counts = []
        for _ in procs:
            counts.extend(result.get(timeout=600))
        elapsed = time.time() - t0
        cpu = (cpu_ticks(proc.pid) - cpu0) / os.sysconf("SC_CLK_TCK")
        for p in procs:
            p.join()
        delivered = sum(counts)
        expected = args.messages * args.subs
        per_msg_us = cpu / max(delivered, 1) * 1e6
        print(
            f"{name:9} delivered {delivered}/{expected} ({'all' if delivered == expected else 'MISSING'}), "
            f"wall {elapsed:.2f}s, server cpu {cpu:.2f}s, {per_msg_us:.3f} us/delivered msg, "
            f"peak rss {peak_rss // 1024} MB"
        )
        return per_msg_us, delivered == expected
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--redis", default="/usr/bin/redis-server")
    ap.add_argument("--ferrodis", default="target/release/ferrodis-server")
    ap.add_argument("--port", type=int, default=7620)
    ap.add_argument("--subs", type=int, default=100)
    ap.add_argument("--patterns", type=int, default=50)
    ap.add_argument("--messages", type=int, default=100000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--procs", type=int, default=4, help="subscriber processes")
    ap.add_argument("--only", choices=["redis", "ferrodis"], help="run against one server only")
    args = ap.parse_args()
    if args.only == "ferrodis":
        return 0 if run_one("ferrodis", [args.ferrodis, "--port", str(args.port + 1)], args.port + 1, args)[1] else 1
    if args.only == "redis":
        argv = [args.redis, "--port", str(args.port), "--save", "", "--appendonly", "no"]
        return 0 if run_one("redis", argv, args.port, args)[1] else 1
    redis = run_one("redis", [args.redis, "--port", str(args.port), "--save", "", "--appendonly", "no"], args.port, args)
    ferro = run_one("ferrodis", [args.ferrodis, "--port", str(args.port + 1)], args.port + 1, args)
    print(f"cpu per delivered message, ferrodis/redis: {ferro[0] / redis[0]:.2f}")
    return 0 if redis[1] and ferro[1] else 1


if __name__ == "__main__":
    sys.exit(main())
