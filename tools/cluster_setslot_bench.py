#!/usr/bin/env python3
"""The per-slot step of a resharding, timed: two nodes (the first owning every slot); for each
of N slots, as redis-cli --cluster reshard does with an empty slot: SETSLOT IMPORTING on the
target, SETSLOT MIGRATING on the source, GETKEYSINSLOT on the source, SETSLOT NODE on the
target, then on the source. Each SETSLOT saves nodes.conf (the target's SETSLOT NODE bumps its
config epoch, so that save is fsynced, in Redis too). Prints mean, p99 and max per slot (ms).

  tools/cluster_setslot_bench.py [--server PATH] [--base PORT] [--slots N]
"""
import argparse, os, shutil, socket, subprocess, tempfile, time


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in (str(x).encode() for x in args))
        self.s.sendall(out)
        return self.read()

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if t == b"*":
            return [self.read() for _ in range(int(rest))]
        if t == b"-":
            raise RuntimeError(rest.decode())
        return rest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target/ci/ferrodis-server"))
    ap.add_argument("--base", type=int, default=15300)
    ap.add_argument("--slots", type=int, default=1000)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="setslot-")
    procs = []
    try:
        for i in range(2):
            p = a.base + i
            os.makedirs(f"{d}/{p}")
            procs.append(subprocess.Popen([a.server if a.server.startswith("/") else os.path.abspath(a.server),
                                           "--port", str(p), "--cluster-enabled", "yes", "--save", "", "--appendonly", "no"],
                                          cwd=f"{d}/{p}", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        src, dst = Conn(a.base), Conn(a.base + 1)
        src.cmd("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        src.cmd("CLUSTER", "MEET", "127.0.0.1", a.base + 1)
        sid, did = src.cmd("CLUSTER", "MYID").decode(), dst.cmd("CLUSTER", "MYID").decode()
        while sid.encode() not in dst.cmd("CLUSTER", "NODES") or b"handshake" in src.cmd("CLUSTER", "NODES"):
            time.sleep(0.1)
        times = []
        for slot in range(a.slots):
            t = time.perf_counter()
            dst.cmd("CLUSTER", "SETSLOT", slot, "IMPORTING", sid)
            src.cmd("CLUSTER", "SETSLOT", slot, "MIGRATING", did)
            src.cmd("CLUSTER", "GETKEYSINSLOT", slot, 10)
            dst.cmd("CLUSTER", "SETSLOT", slot, "NODE", did)
            src.cmd("CLUSTER", "SETSLOT", slot, "NODE", did)
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        print(f"{a.slots} slots: mean {sum(times) / len(times):.3f} ms  p99 {times[int(len(times) * 0.99)]:.3f} ms"
              f"  max {times[-1]:.3f} ms per slot ({os.path.basename(a.server)})")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
