#!/usr/bin/env python3
"""Issue 19, acceptance 6 (second half): does the cluster bus stall clients? A 1 ms PING probe
(its own process per node, so the load generators cannot delay it) measures the worst round
trip on each master of a 3-master, 3-replica cluster (tools/cluster_create.sh) while the bus is
busy with, in turn:
  idle      gossip only (6 nodes pinging each other)
  publish   a client on the third master PUBLISHes 64 KiB messages: each goes to every node
            over the bus
  reshard   redis-cli --cluster reshard of 1000 slots holding 20000 keys from the first master
            to the second (SETSLOT, MIGRATE, UPDATE messages)
  failover  kill -9 of the third master: failure reports, FAIL, the replica's election and
            promotion (probes on the first two masters)
Run it against ferrodis and against redis-server on the same machine; compare per phase.
Figures: max and 99.9th percentile round trip in ms, and samples.

  tools/cluster_bus_stall.py [--server PATH] [--base PORT] [--seconds S] [--rt-probe] [--stretch]

With --rt-probe the probes run SCHED_FIFO, so the load generators and the other nodes sharing
their CPU cannot delay them: what is left is the server's own delay. With --stretch,
tools/loop_stretch.py records the probed nodes' event loops during each phase and reports, per
node, the longest work between two looks at the sockets: the node's own part of a probe's wait.
"""
import argparse, multiprocessing as mp, os, signal, socket, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))


RT_PROBE = False


def probe(port, stop, out):
    """PING every ms until `stop` is set; report (max, p99.9, samples) in ms."""
    if RT_PROBE:
        # SCHED_FIFO: woken, the probe runs at once whatever else wants its CPU, so its maximum
        # is the server's delay, not its own wait for a time slice on a 2-core machine.
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    lat = []
    while not stop.is_set():
        t = time.perf_counter()
        s.sendall(b"PING\r\n")
        buf = b""
        while not buf.endswith(b"\r\n"):
            buf += s.recv(64)
        lat.append((time.perf_counter() - t) * 1000)
        time.sleep(0.001)
    lat.sort()
    out.put((port, lat[-1] if lat else 0, lat[int(len(lat) * 0.999)] if lat else 0, len(lat)))


def cli(*args, check=True):
    r = subprocess.run(["redis-cli", *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"redis-cli {' '.join(map(str, args))}: {r.stdout}{r.stderr}")
    return r.stdout


def node_id(port):
    return cli("-p", port, "cluster", "myid").strip()


STRETCH_PIDS = None  # port -> pid, with --stretch


def phase(name, ports, action):
    stop, out = mp.Event(), mp.Queue()
    procs = [mp.Process(target=probe, args=(p, stop, out)) for p in ports]
    for p in procs:
        p.start()
    recorder = None
    if STRETCH_PIDS:
        # The nodes' own part of the probes' wait: their event loops' stretches (loop_stretch.py).
        recorder = subprocess.Popen([sys.executable, os.path.join(HERE, "loop_stretch.py"), "--profile",
                                     "--top", "2"] + [str(STRETCH_PIDS[p]) for p in ports],
                                    stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)
    time.sleep(0.3)
    action()
    stop.set()
    res = sorted(out.get() for _ in procs)
    for p in procs:
        p.join()
    if recorder:
        recorder.send_signal(signal.SIGTERM)
        report = recorder.communicate()[0]
    for port, mx, p999, n in res:
        print(f"{name:9} node {port}: max {mx:6.2f} ms  p99.9 {p999:5.2f} ms  samples {n}", flush=True)
    if recorder:
        print("  " + report.rstrip().replace("\n", "\n  "), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default=os.path.join(HERE, "..", "target/ci/ferrodis-server"))
    ap.add_argument("--base", type=int, default=15200)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rt-probe", action="store_true", help="probes run SCHED_FIFO (root)")
    ap.add_argument("--stretch", action="store_true",
                    help="also record the probed nodes' event-loop stretches (loop_stretch.py --profile; root, perf)")
    a = ap.parse_args()
    global RT_PROBE, STRETCH_PIDS
    RT_PROBE = a.rt_probe
    server = os.path.abspath(a.server) if not a.server.startswith("/") else a.server
    d = f"/tmp/ferrodis-bus-stall-{a.base}"
    create = [os.path.join(HERE, "cluster_create.sh"), "--server", server, "--base", str(a.base),
              "--dir", d, "--node-timeout", "3000"]
    subprocess.run(create, check=True, capture_output=True)
    try:
        m = [a.base, a.base + 1, a.base + 2]
        if a.stretch:
            pids = [int(p) for p in open(os.path.join(d, "pids")).read().split()]
            STRETCH_PIDS = {a.base + i: pid for i, pid in enumerate(pids)}
        # Wait for the replicas' first sync and a settled cluster.
        time.sleep(2)
        phase("idle", m, lambda: time.sleep(a.seconds))

        def publish():
            s = socket.create_connection(("127.0.0.1", m[2]))
            msg = b"x" * 65536
            cmd = b"*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n$%d\r\n%s\r\n" % (len(msg), msg)
            end = time.time() + a.seconds
            while time.time() < end:
                s.sendall(cmd)
                s.recv(64)
        phase("publish", m, publish)

        def reshard():
            src, dst = node_id(m[0]), node_id(m[1])
            # 20000 keys in the first master's slots (0-5460): {N} tags keep them there.
            pipe = "".join(f"SET {{{i % 5000}}}:{i} value-{i}\n" for i in range(20000))
            subprocess.run(["redis-cli", "-c", "-p", str(m[0])], input=pipe, capture_output=True, text=True)
            subprocess.run(["redis-cli", "--cluster", "reshard", f"127.0.0.1:{m[0]}", "--cluster-from", src,
                            "--cluster-to", dst, "--cluster-slots", "1000", "--cluster-yes",
                            "--cluster-pipeline", "100"], capture_output=True, check=True)
        phase("reshard", m, reshard)

        def failover():
            pid = int(open(os.path.join(d, "pids")).read().split()[2])
            os.kill(pid, signal.SIGKILL)

            def promoted():
                rows = [l.split() for l in cli("-p", m[0], "cluster", "nodes").splitlines()]
                serving = [r for r in rows if "master" in r[2] and "fail" not in r[2] and len(r) > 8]
                return len(serving) >= 3 and any("fail" in r[2] for r in rows)
            end = time.time() + 20
            while time.time() < end and not promoted():
                time.sleep(0.1)
            print(f"failover: replica promoted: {promoted()}", flush=True)
            time.sleep(1)
        phase("failover", m[:2], failover)
    finally:
        subprocess.run([os.path.join(HERE, "cluster_create.sh"), "--dir", d, "--stop"], capture_output=True)


if __name__ == "__main__":
    main()
