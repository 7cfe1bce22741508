#!/usr/bin/env python3
"""redis-benchmark --tls against Ferrodis and real redis-server side by side (issue 22, acceptance 3).

  tools/tls_bench.py --server target/release/ferrodis-server [--rounds 5] [--pin] [-n 200000]

Both servers get the same certificates (made here with openssl) and `tls-auth-clients yes`; stock
redis-benchmark runs over TLS against each in turn (A B, B A, ...) for SET and GET at -P 1 and -P 16,
and with `-k 0` (a new connection, so a new handshake, per request) for the handshake rate. It
prints ratios ferrodis/redis of the medians: throughput (above 1 is ahead) and the server's own CPU
time per request, all threads, from /proc (below 1 is ahead). Then, per server, what explains a
-P 1 gap: the client's CPU per request (redis-benchmark's one thread is the bottleneck at -P 1, so
throughput is about one over it) and the server's voluntary context switches per request (each is a
sleep that the client's next write has to wake; on a VM without guest halt-polling the client pays
about 14 us of its own CPU for that, see src/server/coalesce.rs).
"""
import argparse
import csv
import io
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certs(d):
    def ssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ssl("req", "-x509", "-new", "-nodes", "-newkey", "rsa:2048", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "2", "-subj", "/CN=bench CA")
    for name in ("server", "client"):
        ssl("req", "-new", "-nodes", "-newkey", "rsa:2048", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}")
        ssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "2")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sleeps(pid):
    """Voluntary context switches of all the process's threads."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                total += sum(int(l.split()[1]) for l in f if l.startswith("voluntary_ctxt_switches"))
        except OSError:
            pass
    return total


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Server:
    def __init__(self, name, binary, certs, pin, extra=()):
        self.name, self.port, self.tls_port = name, free_port(), free_port()
        self.dir = tempfile.mkdtemp(prefix=f"tlsbench-{name}-")
        argv = [binary, "--port", str(self.port), "--tls-port", str(self.tls_port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", self.dir,
                "--tls-cert-file", f"{certs}/server.crt", "--tls-key-file", f"{certs}/server.key",
                "--tls-ca-cert-file", f"{certs}/ca.crt", *extra]
        if pin:
            argv = ["taskset", "-c", "1"] + argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True,
                             text=True).stdout.strip() != "PONG":
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit(f"{name} did not start")
            time.sleep(0.1)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def bench(server, certs, test, pipeline, n, clients, keepalive, pin):
    argv = ["redis-benchmark", "--tls", "--cacert", f"{certs}/ca.crt", "--cert", f"{certs}/client.crt",
            "--key", f"{certs}/client.key", "-p", str(server.tls_port), "-n", str(n), "-c", str(clients),
            "-P", str(pipeline), "-k", str(keepalive), "-t", test, "--csv"]
    if pin:
        argv = ["taskset", "-c", "0"] + argv
    cpu0, sleeps0, client0 = cpu_seconds(server.proc.pid), sleeps(server.proc.pid), children_cpu()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    cpu = cpu_seconds(server.proc.pid) - cpu0
    slept = sleeps(server.proc.pid) - sleeps0
    client = children_cpu() - client0
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    if not rows:
        sys.exit(f"redis-benchmark against {server.name} gave nothing: {out.stderr[-500:]}")
    return float(rows[0]["rps"]), cpu * 1e6 / n, client * 1e6 / n, slept / n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", type=int, default=200000)
    ap.add_argument("-c", type=int, default=50)
    ap.add_argument("--handshakes", type=int, default=5000, help="requests of the -k 0 run (0: none)")
    ap.add_argument("--pin", action="store_true", help="server on CPU 1, redis-benchmark on CPU 0")
    ap.add_argument("--ferrodis-arg", action="append", default=[], metavar="ARG",
                    help="one more argument for ferrodis (repeat: --ferrodis-arg=--wakeup-coalescing-us --ferrodis-arg=25)")
    ap.add_argument("--pipelines", default="1,16", help="the -P values of the SET and GET runs")
    args = ap.parse_args()
    certs = tempfile.mkdtemp(prefix="tlsbench-certs-")
    make_certs(certs)
    servers = [Server("ferrodis", args.server, certs, args.pin, args.ferrodis_arg),
               Server("redis", args.redis, certs, args.pin)]
    cases = [(t, int(p), 1, args.n) for p in args.pipelines.split(",") for t in ("set", "get")]
    if args.handshakes:
        cases.append(("ping_mbulk", 1, 0, args.handshakes))
    figures = {}
    try:
        for r in range(args.rounds):
            order = servers if r % 2 == 0 else servers[::-1]
            for test, pipeline, keepalive, n in cases:
                for s in order:
                    row = bench(s, certs, test, pipeline, n, args.c, keepalive, args.pin)
                    figures.setdefault((test, pipeline, keepalive), {}).setdefault(s.name, []).append(row)
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(certs, ignore_errors=True)
    print(f"{'test':<24}{'rps ferrodis':>14}{'rps redis':>12}{'rps x':>8}{'cpu/req x':>11}"
          f"{'client us/req f r':>20}{'sleeps/req f r':>16}  (medians of {args.rounds})")
    for (test, pipeline, keepalive), by in figures.items():
        f = [statistics.median(v[i] for v in by["ferrodis"]) for i in range(4)]
        r = [statistics.median(v[i] for v in by["redis"]) for i in range(4)]
        name = "handshakes (-k 0)" if keepalive == 0 else f"{test.upper()} -P {pipeline}"
        print(f"{name:<24}{f[0]:>14.0f}{r[0]:>12.0f}{f[0] / r[0]:>8.2f}{f[1] / r[1]:>11.2f}"
              f"{f[2]:>11.2f}{r[2]:>9.2f}{f[3]:>9.3f}{r[3]:>7.3f}")


if __name__ == "__main__":
    main()
