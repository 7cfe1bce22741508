#!/usr/bin/env python3
"""The stall other clients see while the keyspace grows (issue 21, acceptance 2).

    python3 tools/growth_stall.py --server target/release/ferrodis-server [--keys 10000000]
                                  [--rounds 1] [--pin] [--rt-probe] [--stretch]

Starts ferrodis and real redis-server in turn, each empty with persistence off, and runs
redis-benchmark `-t set -P 16 -r KEYS*10 -n KEYS` against it while a probe on its own connection
sends a PING every millisecond. Prints, per server and round, the probe's maximum and 99.9th
percentile round trip, the keys the server ended with, and the benchmark's time. With --pin
the server runs on CPU 0 and the benchmark and the probe on the last CPU. With --rt-probe the
probe thread runs SCHED_FIFO: on a 2-core machine the benchmark keeps the probe's CPU busy, and
without it the probe's maximum is mostly its own wait for a time slice (tens of ms for both servers).
With --stretch, tools/loop_stretch.py records the server's event loop meanwhile and its report
follows each run: the longest work between two looks at the sockets, which is the server's own part
of the probe's wait (the rest is the machine's).
"""
import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(port, deadline_s=10.0):
    end = time.time() + deadline_s
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return s
        except OSError:
            if time.time() > end:
                raise
            time.sleep(0.05)


def command(s, line):
    s.sendall(line.encode() + b"\r\n")
    data = b""
    while not data.endswith(b"\r\n"):
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        data += chunk
    return data


def probe(port, stop, samples, rt):
    if rt:
        # The probe thread alone runs SCHED_FIFO: woken, it preempts redis-benchmark on its CPU at
        # once, so what it measures is the server's delay, not its own wait for a time slice.
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    s = connect(port)
    while not stop.is_set():
        t = time.perf_counter()
        s.sendall(b"PING\r\n")
        got = b""
        while not got.endswith(b"\r\n"):
            got += s.recv(64)
        samples.append((time.perf_counter() - t) * 1000.0)
        time.sleep(0.001)
    s.close()


@contextlib.contextmanager
def empty_server(server_cmd, pin):
    """An empty server with persistence off in a scratch directory (on CPU 0 when pinned), for
    the length of the block: yields the process and its port; killed and its directory removed
    after."""
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="stall-")
    cmd = server_cmd + ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--dir", workdir]
    if pin:
        cmd = ["taskset", "-c", "0"] + cmd
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield server, port
    finally:
        server.kill()
        server.wait()
        subprocess.run(["rm", "-rf", workdir])


def one_run(server_cmd, keys, pin, rt=False, stretch=False):
    cpus = os.cpu_count() or 1
    with empty_server(server_cmd, pin) as (server, port):
        ctl = connect(port)
        stop, samples = threading.Event(), []
        prober = threading.Thread(target=probe, args=(port, stop, samples, rt))
        prober.start()
        time.sleep(0.5)
        recorder = None
        if stretch:
            # The server's own part of the probe's wait: its event loop's stretches (loop_stretch.py).
            recorder = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "loop_stretch.py"), str(server.pid), "--profile", "--top", "3"],
                                        stdout=subprocess.PIPE, text=True)
            time.sleep(1.0)
        bench = ["redis-benchmark", "-p", str(port), "-t", "set", "-P", "16", "-c", "50", "-q",
                 "-n", str(keys), "-r", str(keys * 10)]
        if pin:
            bench = ["taskset", "-c", str(cpus - 1)] + bench
        started = time.time()
        subprocess.run(bench, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        elapsed = time.time() - started
        time.sleep(0.5)
        stop.set()
        prober.join()
        stretches = None
        if recorder:
            recorder.send_signal(signal.SIGTERM)
            stretches = recorder.communicate()[0]
        dbsize = int(command(ctl, "DBSIZE")[1:-2])
        ordered = sorted(samples)
        p999 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.999))]
        return {"max_ms": ordered[-1], "p999_ms": p999, "samples": len(ordered), "keys": dbsize,
                "seconds": elapsed, "stretches": stretches}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--rt-probe", action="store_true",
                    help="run the probe thread SCHED_FIFO (root), so its own scheduling does not count")
    ap.add_argument("--stretch", action="store_true",
                    help="also record the server's event-loop stretches (tools/loop_stretch.py --profile; root, perf)")
    a = ap.parse_args()
    worst = {}
    for r in range(a.rounds):
        for name, cmd in (("ferrodis", a.server.split()), ("redis", a.redis.split())):
            res = one_run(cmd, a.keys, a.pin, a.rt_probe, a.stretch)
            worst[name] = max(worst.get(name, 0.0), res["max_ms"])
            print(f"round {r + 1} {name:8} probe max {res['max_ms']:7.2f} ms  p99.9 {res['p999_ms']:6.2f} ms  "
                  f"samples {res['samples']}  keys {res['keys']}  {res['seconds']:.1f} s", flush=True)
            if res["stretches"]:
                print("  " + res["stretches"].rstrip().replace("\n", "\n  "), flush=True)
    print(f"probe max over rounds: ferrodis {worst['ferrodis']:.2f} ms, redis {worst['redis']:.2f} ms")


if __name__ == "__main__":
    main()
