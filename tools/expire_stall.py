#!/usr/bin/env python3
"""The stall other clients see while many keys expire at once (issue 21: active expiry).

    python3 tools/expire_stall.py --server target/release/ferrodis-server [--keys 1000000]
                                  [--ttl-ms 4000] [--rounds 1]

Starts ferrodis and real redis-server in turn (on CPU 0), each empty with persistence off, loads
KEYS keys with `SET key v PX TTL` through redis-cli --pipe (on the last CPU), and while they
expire, all at once, a probe on its own connection sends a PING every millisecond from a
SCHED_FIFO thread (as growth_stall.py --rt-probe). Prints, per server and round, the probe's
maximum, 99.9th and 99th percentile round trip and the seconds from the start of the load until
DBSIZE read 0. Redis's active expire cycle takes up to 25% of a cron period (25 ms at hz 10) in
one go; ferrodis runs the same budget in 250 us slices with the clients' turns in between.
"""
import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from growth_stall import command, connect, empty_server, probe  # noqa: E402


def dataset(keys, ttl_ms):
    ttl = str(ttl_ms).encode()
    out = bytearray()
    for i in range(keys):
        k = b"key:%d" % i
        out += b"*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n$2\r\nPX\r\n$%d\r\n%s\r\n" % (len(k), k, len(ttl), ttl)
    return bytes(out)


def one_run(binary, data, deadline_s):
    last_cpu = (os.cpu_count() or 1) - 1
    with empty_server([binary], pin=True) as (_, port):
        ctl = connect(port)
        started = time.time()
        subprocess.run(["taskset", "-c", str(last_cpu), "redis-cli", "-p", str(port), "--pipe"], input=data,
                       capture_output=True, check=True)
        stop, samples = threading.Event(), []
        prober = threading.Thread(target=probe, args=(port, stop, samples, True))
        prober.start()
        while int(command(ctl, "DBSIZE")[1:-2]) > 0 and time.time() - started < deadline_s:
            time.sleep(0.05)
        gone = time.time() - started
        time.sleep(0.3)
        stop.set()
        prober.join()
        ordered = sorted(samples)
        pick = lambda q: ordered[min(len(ordered) - 1, int(len(ordered) * q))]  # noqa: E731
        return {"max": ordered[-1], "p999": pick(0.999), "p99": pick(0.99), "samples": len(ordered), "gone": gone}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--ttl-ms", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    data = dataset(a.keys, a.ttl_ms)
    for r in range(a.rounds):
        for name, binary in (("ferrodis", a.server), ("redis", a.redis)):
            res = one_run(binary, data, 60 + a.ttl_ms / 1000)
            print(f"round {r + 1} {name:8} probe max {res['max']:6.2f} ms  p99.9 {res['p999']:6.2f} ms  "
                  f"p99 {res['p99']:5.2f} ms  samples {res['samples']}  all expired {res['gone']:.1f} s after "
                  "the load began", flush=True)


if __name__ == "__main__":
    main()
