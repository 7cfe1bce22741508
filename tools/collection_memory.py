#!/usr/bin/env python3
"""Memory of many small collections, side by side with real redis-server.

Loads N keys of one collection type (10 small elements each) through redis-cli --pipe into a fresh
redis-server and a fresh ferrodis-server, and prints RSS growth per key for both and the ratio.

  tools/collection_memory.py --server target/release/ferrodis-server [--keys 100000] [--type hash|set|zset|list|strsetN]
"""
import argparse, os, socket, subprocess, sys, tempfile, time

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)

def rss(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0

def dataset(kind, keys):
    buf = bytearray()
    for i in range(keys):
        k = b"%s:%d" % (kind.encode(), i)
        if kind == "hash":
            args = [b"HSET", k]
            for j in range(10):
                args += [b"field:%d" % j, b"value:%d" % (i + j)]
        elif kind.startswith("strset"):
            # strsetN: N short strings ("member:0" ...), the hashtable encoding in Redis 7.0.
            args = [b"SADD", k] + [b"member:%d" % j for j in range(int(kind[6:] or 3))]
        elif kind == "set":
            args = [b"SADD", k] + [b"%d" % (i * 10 + j) for j in range(10)]
        elif kind == "zset":
            args = [b"ZADD", k]
            for j in range(10):
                args += [b"%d" % j, b"member:%d" % j]
        else:
            args = [b"RPUSH", k] + [b"item:%d" % j for j in range(10)]
        buf += resp(*args)
    return bytes(buf)

def measure(cmd, data):
    port = free_port()
    d = tempfile.mkdtemp()
    p = subprocess.Popen(cmd + ["--port", str(port), "--save", "", "--appendonly", "no", "--dir", d],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    time.sleep(0.3)
    base = rss(p.pid)
    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=data, capture_output=True, check=True)
    time.sleep(1.0)
    after = rss(p.pid)
    p.terminate(); p.wait()
    return base, after

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--type", default="hash,set,zset,list")
    a = ap.parse_args()
    for kind in a.type.split(","):
        data = dataset(kind, a.keys)
        rb, ra = measure(["redis-server"], data)
        fb, fa = measure([a.server], data)
        print("%-5s redis rss %6.1f MB (%5.0f B/key)  ferrodis rss %6.1f MB (%5.0f B/key)  rss ratio %.2f  growth ratio %.2f"
              % (kind, ra / 1e6, (ra - rb) / a.keys, fa / 1e6, (fa - fb) / a.keys, fa / ra, (fa - fb) / max(ra - rb, 1)))

if __name__ == "__main__":
    main()
