#!/usr/bin/env python3
"""Seeds the restore_payload fuzz corpus: loads an RDB file into a throw-away redis-server, DUMPs
every key and stores each payload without its 10-byte footer (type byte + body, the target's
input format). Usage: seed_payloads.py FILE.rdb OUTDIR"""
import hashlib, os, shutil, socket, subprocess, sys, tempfile, time

def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    d = tempfile.mkdtemp()
    shutil.copy(src, os.path.join(d, "dump.rdb"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    p = subprocess.Popen(["redis-server", "--port", str(port), "--dir", d, "--save", "", "--appendonly", "no"],
                         stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                c = socket.create_connection(("127.0.0.1", port)); break
            except OSError:
                time.sleep(0.05)
        f = c.makefile("rb")
        def cmd(*a):
            b = b"*%d\r\n" % len(a)
            for x in a:
                x = x.encode() if isinstance(x, str) else x
                b += b"$%d\r\n%s\r\n" % (len(x), x)
            c.sendall(b); return read()
        def read():
            l = f.readline(); t = l[:1]
            if t == b"$":
                n = int(l[1:]); return None if n < 0 else f.read(n + 2)[:-2]
            if t == b"*": return [read() for _ in range(int(l[1:]))]
            if t == b"-": raise RuntimeError(l)
            return l[:-2]
        while cmd("PING") != b"+PONG": time.sleep(0.05)
        n = 0
        for db in range(16):
            cmd("SELECT", str(db)); cur = b"0"
            while True:
                cur, keys = cmd("SCAN", cur, "COUNT", "1000")
                for k in keys:
                    body = cmd("DUMP", k)[:-10]
                    open(os.path.join(out, hashlib.sha1(body).hexdigest()), "wb").write(body); n += 1
                if cur == b"0": break
        print(f"{n} payloads seeded into {out}")
    finally:
        p.kill(); p.wait(); shutil.rmtree(d, ignore_errors=True)

if __name__ == "__main__":
    main()
