#!/usr/bin/env python3
"""How long the server's event loop goes without looking at its sockets (issue 21).

    sudo python3 loop_stretch.py PID... [--seconds N] [--tid TID] [--top 5] [--profile]

Records until --seconds have passed or until it gets SIGTERM/SIGINT, then reports.

A PING probe measures what a client waits, but on a small shared machine its maximum is mostly the
machine: the probe, the server and the load share CPUs, and an idle server's probe already sees
2-4 ms here. This measures the server's own part instead, from kernel tracepoints (perf record:
epoll_wait's entry and exit, and the scheduler's switches) on the thread that runs the event loop
(the process's main thread unless --tid says otherwise; ferrodis with io-threads 1 runs its
executor and connections there, as redis-server does).

A stretch is the time from one epoll_wait's return to the next epoll_wait's entry: the loop's work
between two looks at the sockets, during which a client that sends a request waits for the server
whatever the machine. For each stretch it counts the wall time and the time the thread was on a CPU
(wall time minus the time it was switched out, preempted by other processes). The on-CPU maximum is
what the server's own work costs another client; the wall maximum adds what the machine took.
Tokio polls epoll with a zero timeout between its tasks, so a stretch ends there too.

On a virtual machine the host can take the CPU away without the guest's scheduler knowing (steal):
the thread then reads as on-CPU for a few milliseconds while doing nothing. --profile also samples
the thread's stack at 4 kHz and counts, per stretch, the samples that fell in it: samples x 250 us is
the work done there, whatever the host took (a 4 ms "on-CPU" stretch with one sample was the host's).
It prints what ran in the stretches with the most samples.

Keep the recording window over the whole measurement: when perf stops and its data is read, probes
running then on this 2-core VM saw 150-540 ms round trips, which the server did not cause.
"""
import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile

SAMPLE_HZ = 4000
EVENT = re.compile(r"^\s*\S.*?\s(\d+)\s+(?:\[\d+\]\s+)?([\d.]+):\s+(?:\d+\s+)?(\S+):(?:\s+(.*))?$")


def record(seconds, out, profile):
    events = ["-e", "syscalls:sys_enter_epoll_wait", "-e", "syscalls:sys_exit_epoll_wait", "-e",
              "sched:sched_switch"]
    if profile:
        events += ["-e", "cpu-clock", "-F", str(SAMPLE_HZ), "-g"]
    # System-wide (-a): a switch back to the thread is recorded in the context of the task it
    # replaces (often the idle task), which a per-process recording would miss.
    perf = subprocess.Popen(["perf", "record", "-q", "-a"] + events + ["-o", out, "--", "sleep",
                            str(seconds or 86400)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    # SIGTERM or SIGINT to this script ends the recording early; perf writes what it has.
    def stop(_sig, _frame):
        perf.send_signal(signal.SIGINT)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    perf.wait()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if not os.path.exists(out):
        sys.exit("perf record wrote nothing")


def stretches(script_lines, tid):
    """Yields (wall_us, on_cpu_us, samples, start_s) for each stretch of thread tid; samples are
    the cpu-clock samples' innermost frames within it (with --profile)."""
    start = None        # when the current stretch began (epoll_wait returned)
    off_since = None    # when the thread was switched out within it
    off_total = 0.0
    samples = []
    in_sample = None    # the frames of the cpu-clock sample being read
    prev_pid = re.compile(r"prev_pid=(\d+)")
    next_pid = re.compile(r"next_pid=(\d+)")
    for line in script_lines:
        m = EVENT.match(line)
        if not m:
            if in_sample is not None and line.strip():
                parts = line.split(None, 1)
                if len(in_sample) < 4 and len(parts) > 1:
                    in_sample.append(parts[1].split("+0x")[0][:60])
            elif in_sample is not None:
                samples.append(" < ".join(in_sample))
                in_sample = None
            continue
        if in_sample is not None:
            samples.append(" < ".join(in_sample))
            in_sample = None
        ev_tid, ts, event, rest = int(m.group(1)), float(m.group(2)), m.group(3), m.group(4) or ""
        if event.startswith("cpu-clock") and ev_tid == tid and start is not None:
            in_sample = []
        elif event == "syscalls:sys_exit_epoll_wait" and ev_tid == tid:
            start, off_since, off_total, samples = ts, None, 0.0, []
        elif event == "syscalls:sys_enter_epoll_wait" and ev_tid == tid:
            if start is not None:
                wall = ts - start
                yield wall * 1e6, (wall - off_total) * 1e6, samples, start
            start = None
        elif event == "sched:sched_switch" and start is not None:
            p, n = prev_pid.search(rest), next_pid.search(rest)
            if p and int(p.group(1)) == tid:
                off_since = ts
            elif n and int(n.group(1)) == tid and off_since is not None:
                off_total += ts - off_since
                off_since = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pid", type=int, nargs="+", help="the servers' processes (reported one by one)")
    ap.add_argument("--tid", type=int, help="the event loop's thread (default: each process's main thread)")
    ap.add_argument("--seconds", type=float, default=0.0,
                    help="how long to record (default: until SIGTERM or SIGINT)")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--profile", action="store_true",
                    help="also sample the stack (4 kHz) and show what ran in the longest stretches")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        record(a.seconds, data, a.profile)
        script = subprocess.run(["perf", "script", "-i", data], check=True, capture_output=True,
                                text=True).stdout.splitlines()
    for pid in a.pid:
        if len(a.pid) > 1:
            print("process %d:" % pid)
        report(list(stretches(script, a.tid or pid)), a.tid or pid, a)


def report(found, tid, a):
    if not found:
        print("no epoll_wait seen on thread %d" % tid)
        return
    t0 = found[0][3]
    by_cpu = sorted(found, key=lambda s: s[1])
    by_wall = sorted(found, key=lambda s: s[0])
    n = len(found)
    print("%d stretches in %.1f s" % (n, found[-1][3] - t0))
    print("on-CPU us: max %.0f, p99.9 %.0f, p99 %.0f" % (
        by_cpu[-1][1], by_cpu[min(n - 1, int(n * 0.999))][1], by_cpu[min(n - 1, int(n * 0.99))][1]))
    print("wall us:   max %.0f, p99.9 %.0f, p99 %.0f" % (
        by_wall[-1][0], by_wall[min(n - 1, int(n * 0.999))][0], by_wall[min(n - 1, int(n * 0.99))][0]))
    print("longest on-CPU (wall us, on-CPU us):",
          ", ".join("%.0f/%.0f at %.2f s" % (w, c, t - t0) for w, c, _, t in reversed(by_cpu[-a.top:])))
    if a.profile:
        # A stretch the thread spent on a virtual CPU that the host took away (steal) reads as
        # on-CPU here yet holds no samples: the sample count is the work actually done.
        by_samples = sorted(found, key=lambda s: len(s[2]))
        print("sampled work us (samples x %.0f us): max %.0f, p99.9 %.0f, p99 %.0f" % (
            1e6 / SAMPLE_HZ, len(by_samples[-1][2]) * 1e6 / SAMPLE_HZ,
            len(by_samples[min(n - 1, int(n * 0.999))][2]) * 1e6 / SAMPLE_HZ,
            len(by_samples[min(n - 1, int(n * 0.99))][2]) * 1e6 / SAMPLE_HZ))
        for w, c, samples, t in reversed(by_samples[-a.top:]):
            print("stretch %.0f us (on-CPU %.0f) at %.2f s: %d samples" % (w, c, t - t0, len(samples)))
            for stack, count in collections.Counter(samples).most_common(5):
                print("   %4d  %s" % (count, stack))
        for w, c, samples, t in reversed(by_cpu[-a.top:]):
            print("stretch %.0f us (on-CPU %.0f) at %.2f s: %d samples" % (w, c, t - t0, len(samples)))
            for stack, count in collections.Counter(samples).most_common(5):
                print("   %4d  %s" % (count, stack))


main()
